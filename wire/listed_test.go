package wire_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// report is a status of n nodes, each with every field a node's line can
// carry, so that an encoding that dropped or moved one would show.
func report(n int) wire.StatusReport {
	at := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	r := wire.StatusReport{Well: n%2 == 0, Checkpoint: 42, Causes: []string{"the fold is behind"}, Standings: []wire.StandingView{},
		UnreachableAfter: 30, OpenBus: true, AsOf: &at}
	if n >= 0 {
		r.Nodes = make([]wire.NodeStatus, n)
	}
	for i := range r.Nodes {
		heard := at.Add(time.Duration(i) * time.Second)
		r.Nodes[i] = wire.NodeStatus{Name: fmt.Sprintf("node-%06d", i), State: wire.StateCurrent, Sequence: uint64(i) + 1,
			Digest: fmt.Sprintf("%064x", i), Since: at, Detail: "applied <what> & \"why\"", ContentDigest: fmt.Sprintf("%064x", i*7),
			WouldSend: fmt.Sprintf("%064x", i*7), By: "op-" + fmt.Sprint(i%3), Address: "10.0.0.1", LastHeard: &heard}
	}
	return r
}

// An answer listed an item at a time decodes to what json.Marshal of it
// decodes to, whether its list is nil, empty, fits one message, or spans
// many: the client decodes both the same.
func TestAListedAnswerDecodesAsItsMarshal(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	// About 400 bytes a node: 12,000 nodes are some 5 messages.
	for _, n := range []int{-1, 0, 3, 12000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := report(n)
			back := listedAsMarshalled(t, nc, want, n == 12000)
			if (back.Nodes == nil) != (n < 0) {
				t.Fatalf("a list of %d nodes came back nil: %v", n, back.Nodes == nil)
			}
		})
	}
}

// listedAsMarshalled sends want listed, in pieces when pieces says so, and
// fails unless what arrives decodes as json.Marshal of want does; it
// answers what arrived, decoded.
func listedAsMarshalled(t *testing.T, nc *nats.Conn, want wire.StatusReport, inPieces bool) wire.StatusReport {
	t.Helper()
	got, pieces := roundTrip(t, nc, func(r micro.Request) error { return wire.RespondListed(nc, r, want) })
	if (pieces > 1) != inPieces {
		t.Errorf("the answer came in %d pieces", pieces)
	}
	var back, marshalled wire.StatusReport
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("the listed answer is not JSON: %v", err)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &marshalled); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(marshalled, back); d != "" {
		t.Fatalf("the listed answer decodes otherwise than its marshal (-marshal +listed):\n%s", d)
	}
	return back
}

// A brief answer, its nodes in a table written whole (List.Raw), decodes
// to what json.Marshal of it decodes to, the nodes' empty list beside it.
func TestABriefListedAnswerDecodesAsItsMarshal(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 3, 60000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := report(-1)
			want.Nodes, want.Table = []wire.NodeStatus{}, &wire.StatusTable{States: []wire.State{}}
			for i := range n {
				ns := wire.NodeStatus{Name: fmt.Sprintf("node-%06d", i), State: wire.StateCurrent, Sequence: uint64(i%4) + 1, Since: at.Add(time.Duration(i%600) * time.Second)}
				if i%7 == 0 {
					ns.State, ns.Detail = wire.StateRefused, "refused <what> & \"why\""
				}
				want.Table.Add(ns)
			}
			back := listedAsMarshalled(t, nc, want, n == 60000)
			if back.Table == nil || back.Table.Len() != n || back.Nodes == nil {
				t.Fatalf("a table of %d nodes came back as %v, its nodes as %v", n, back.Table, back.Nodes)
			}
		})
	}
}

// A listed answer is never held whole: what sending 40,000 nodes
// allocates is less than half what sending their json.Marshal does (which
// holds the bytes at least twice: its buffer, grown by doubling, and the
// copy it hands back), measured the same way in the same run. The pieces
// go to an inbox nobody reads, and the client asking is a connection of
// its own, so that most of what is counted is the sender's; the embedded
// bus, in this process, counts alike in both.
func TestAListedAnswerIsNotHeldWhole(t *testing.T) {
	s := embeddedtest.Server(t)
	nc, asker := embeddedtest.Conn(t, s), embeddedtest.Conn(t, s)
	want := report(40000)
	allocated := map[string]uint64{}
	counted := make(chan uint64, 1)
	ways := map[string]func(micro.Request) error{
		"listed": func(r micro.Request) error { return wire.RespondListed(nc, r, want) },
		"marshalled": func(r micro.Request) error {
			b, err := json.Marshal(want)
			if err != nil {
				return err
			}
			return wire.Respond(nc, r, b)
		},
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "held", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	for way, respond := range ways {
		err = svc.AddEndpoint(way, micro.HandlerFunc(func(r micro.Request) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if err := respond(r); err != nil {
				t.Error(err)
			}
			runtime.ReadMemStats(&after)
			counted <- after.TotalAlloc - before.TotalAlloc
		}), micro.WithEndpointSubject("test.held."+way))
		if err != nil {
			t.Fatal(err)
		}
		// The asker is another connection: the server must know the
		// endpoint before it asks.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		msg, err := asker.RequestMsg(withInbox("test.held."+way, nats.NewInbox()), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Get(wire.ChunkCountHeader) == "" {
			t.Fatalf("the %s answer came in one message", way)
		}
		allocated[way] = <-counted
	}
	if allocated["listed"] > allocated["marshalled"]/2 {
		t.Fatalf("sending 40,000 nodes listed allocated %d bytes, marshalled %d: the listed answer was held whole", allocated["listed"], allocated["marshalled"])
	}
	t.Logf("sending 40,000 nodes allocated %d bytes listed, %d marshalled", allocated["listed"], allocated["marshalled"])
}

// withInbox is a request to subject naming inbox for its answer's pieces.
func withInbox(subject, inbox string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(wire.ChunksToHeader, inbox)
	return m
}
