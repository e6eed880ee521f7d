package embedded

import (
	"context"
	"testing"
)

// A bus started for one job in this process opens no listener: Connect
// reaches it, and no address does.
func TestInProcessOnlyOpensNoListener(t *testing.T) {
	s, err := Start(context.Background(), Options{Dir: t.TempDir(), InProcessOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := s.Connect()
	if err != nil {
		t.Fatalf("in-process connect: %v", err)
	}
	nc.Close()
	if addr := s.ns.Addr(); addr != nil {
		t.Fatalf("the bus listens on %v", addr)
	}
}
