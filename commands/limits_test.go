package commands_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/access"
	"github.com/meshctl/mesh/commands/modules"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Limits per identity (issue 29): a node's identity writing junk on its own
// report subjects, as fast as it can, on a real closed bus. The controller
// cuts it and refuses it at connect; another node's agent still applies
// what it is pushed; a fresh fold still equals the read models; status
// names the flooder, not well, until the operator acknowledges it. Fails
// when nothing notices a flood (the flooder is never cut, nor named).
func TestAFloodingNodeIsCutAndNamedAndTheRestGoesOn(t *testing.T) {
	t.Parallel()
	m := newTrustMesh(t, true)
	for _, n := range []string{"web-1", "flood"} {
		_, err := m.h.Nodes.Enroll(m.ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n})
		m.must(err)
	}
	m.runAgent("web-1", t.TempDir())
	m.pushAndWait("web-1")
	// The flood: junk, each message as large as a report may be, until the
	// controller cuts the connection (a loop bounded by Eventually, not by time).
	nc := m.connect("flood", nil)
	junk := bytes.Repeat([]byte("x"), events.MaxReport-1)
	subject := events.ReportSubject("flood", events.DeclarationApplied{}.EventType())
	embeddedtest.Eventually(t, "the controller to cut the flooding node", func() bool {
		for range 64 {
			if nc.Publish(subject, junk) != nil {
				break
			}
		}
		_ = nc.Flush()
		return !nc.IsConnected()
	})
	// Refused at connect for the cool-down, not only cut.
	opts, err := m.join("flood").Options()
	m.must(err)
	if again, err := nats.Connect(m.srv.ClientURL(), append(opts, nats.MaxReconnects(0))...); err == nil {
		again.Close()
		t.Fatal("the flooding node connected again during its cool-down")
	}

	// The rest of the mesh goes on: web-1 applies what it is pushed, and
	// the fold believes it.
	p := m.pushAndWait("web-1")
	m.settle()
	s, err := m.h.Status.Status(m.ctx, wire.StatusRequest{})
	m.must(err)
	if i := slices.IndexFunc(s.Nodes, func(n wire.NodeStatus) bool { return n.Name == "web-1" }); i < 0 || s.Nodes[i].State != wire.StateCurrent || s.Nodes[i].Digest != p.Digest {
		t.Fatalf("web-1 after a push past the flood: %+v", s.Nodes)
	}
	v, err := m.h.Status.VerifyProjections(m.ctx, wire.FoldRequest{})
	if err != nil || v.Diff != "" {
		t.Fatalf("verify after a flood: %v\n%s", err, v.Diff)
	}

	// Status names the flooder, with what it did and the remedy.
	s, err = m.h.Status.Status(m.ctx, wire.StatusRequest{})
	m.must(err)
	i := slices.IndexFunc(s.Causes, func(c string) bool { return strings.Contains(c, "node flood flooded its report subjects") })
	if s.Well || i < 0 || !strings.Contains(s.Causes[i], "refused at connect until") || !strings.Contains(s.Causes[i], "mesh foreign ack") {
		t.Fatalf("status after a flood names no flooder: well %v, causes %q", s.Well, s.Causes)
	}
	// Acknowledged, with every foreign message it wrote, in one event.
	acked, err := m.h.Access.AckForeign(m.ctx, wire.AckRequest{CommandID: wire.NewCommandID(), All: true})
	m.must(err)
	if len(acked.Acknowledged) < access.FloodForeign {
		t.Fatalf("ack --all after a flood acknowledged %d", len(acked.Acknowledged))
	}
	s, err = m.h.Status.Status(m.ctx, wire.StatusRequest{})
	m.must(err)
	if slices.ContainsFunc(s.Causes, func(c string) bool { return strings.Contains(c, "flood") || strings.Contains(c, "foreign") }) {
		t.Fatalf("status after the acknowledgement: %q", s.Causes)
	}
}

// A module identity's state bucket is bounded (issue 29: one wrote 902 MB
// to it in 5 s and made 60 consumers): writes past its size and consumers
// past their number are refused by the bus, to that module. Fails when the
// bucket takes whatever a module writes.
func TestAModulesStateBucketIsBounded(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	m := newTrustMesh(t, true)
	_, err := m.h.Nodes.Enroll(m.ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "box"})
	m.must(err)
	_, err = m.h.Modules.RegisterModule(m.ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json",
		Manifest: `{"module":"greeter","run":{"command":"/bin/true"}}`})
	m.must(err)
	_, err = m.h.Nodes.Assign(m.ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "box", Module: "greeter"})
	m.must(err)
	nc, _, err := m.connectModule("box", "greeter", nil, nil)
	m.must(err)
	js, err := jetstream.New(nc)
	m.must(err)
	kv, err := js.KeyValue(m.ctx, events.StateBucket("greeter"))
	m.must(err)

	// Bytes: distinct keys of 60 KB each, twice what the bucket may hold.
	value := bytes.Repeat([]byte("x"), 60<<10)
	var refused error
	for i := 0; refused == nil && i < 2*modules.StateMaxBytes/len(value); i++ {
		_, refused = kv.Put(m.ctx, "box.k"+strconv.Itoa(i), value) // its node's keys only (issue 29)
	}
	var apiErr *jetstream.APIError
	if !errors.As(refused, &apiErr) || !strings.Contains(refused.Error(), "maximum bytes") {
		t.Fatalf("writing twice the bucket's bound: %v", refused)
	}

	// Consumers: one more than the bound is refused.
	var last error
	for i := 0; last == nil && i <= modules.StateMaxConsumers; i++ {
		// Filtered to its node's keys, the only consumers it may make.
		// Kept an hour though unused: an ephemeral consumer idle for the
		// server's default 5 s is removed, and on a loaded box the first
		// were gone before the thousandth was made, so the bound was
		// never reached. In memory: the bound counts them the same, and
		// the bus stops a consumer kept on file with a wait of 10 ms or
		// more for its flusher, so a thousand took 11 s to shut down.
		_, last = js.CreateConsumer(m.ctx, "KV_"+events.StateBucket("greeter"), jetstream.ConsumerConfig{FilterSubject: "$KV." + events.StateBucket("greeter") + ".box.>",
			InactiveThreshold: time.Hour, MemoryStorage: true})
	}
	if last == nil || !strings.Contains(last.Error(), "maximum consumers") {
		t.Fatalf("making %d consumers on the bucket: %v", modules.StateMaxConsumers+1, last)
	}
}
