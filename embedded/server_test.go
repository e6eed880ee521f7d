package embedded_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded"
	"github.com/nats-io/nats.go/jetstream"
)

// Start returns only when JetStream answers, and data survives a Close and a
// new Start on the same directory.
func TestStartIsReadyAndDataSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := embedded.Start(ctx, embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatalf("JetStream not ready when Start returned: %v", err)
	}
	if _, err := js.Publish(ctx, "t.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Close()

	s, err = embedded.Start(ctx, embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("listens on %s, want loopback by default", s.ClientURL())
	}
	nc, _ = s.Connect()
	defer nc.Close()
	js, _ = jetstream.New(nc)
	st, err := js.Stream(ctx, "T")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("after restart: %v", err)
	}
}

func TestPortInUseIsOneSentence(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("port in use: %v", err)
	}
}
