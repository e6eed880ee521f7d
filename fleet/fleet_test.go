package fleet

import (
	"context"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent"
	"github.com/nats-io/nats.go"
)

// A fleet names each node once, and waits only for its own agents: both
// are refused before anything connects or waits.
func TestFleetRefusesWhatItCannotMeasure(t *testing.T) {
	connects := 0
	cfg := Config{Joins: []agent.Join{{Node: "a"}, {Node: "a"}}, Dir: t.TempDir(),
		Connect: func(agent.Join) (*nats.Conn, error) { connects++; return nil, nil }}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "twice") || connects != 0 {
		t.Fatalf("a node given twice: err %v after %d connection(s)", err, connects)
	}
	// A join with no key enrols one only where the fleet can dial for it.
	cfg = Config{Joins: []agent.Join{{Node: "a", Token: "t1.secret"}}, Dir: t.TempDir(),
		Connect: func(agent.Join) (*nats.Conn, error) { connects++; return nil, nil }}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "neither a key nor a way to enrol") || connects != 0 {
		t.Fatalf("a join with no key and no way to enrol: err %v after %d connection(s)", err, connects)
	}
	f, err := Start(context.Background(), Config{Dir: t.TempDir()})
	if err != nil || f.Len() != 0 {
		t.Fatalf("an empty fleet: %v", err)
	}
	defer f.Stop()
	if _, err := f.Await(context.Background(), map[string]uint64{"stranger": 1}); err == nil {
		t.Fatal("awaiting a node the fleet does not run was taken")
	}
}
