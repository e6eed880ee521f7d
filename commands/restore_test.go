package commands_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Restore is all or nothing (rule 26): a restore stopped part way leaves a
// stream no controller serves, saying how far it got and what to do; the
// same restore again resumes after the last event that landed, and the
// mesh then serves exactly what was backed up.
func TestAPartialRestoreIsNeverServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newTrustMesh(t, false)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: n})
		m.must(err)
	}
	_, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	m.must(err)
	var backup bytes.Buffer
	manifest, err := m.h.Core.Store.Export(ctx, &backup)
	m.must(err)
	want, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)

	// A new bus; the restore dies after half the backup's lines.
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	st, _, err := store.Open(ctx, nc, store.StreamConfig{})
	m.must(err)
	lines := bytes.SplitAfter(backup.Bytes(), []byte("\n"))
	half := bytes.Join(lines[:len(lines)/2], nil)
	if _, _, err := st.Import(ctx, manifest, bytes.NewReader(append(half, []byte(`{"seq":`)...))); err == nil {
		t.Fatal("a restore cut off part way said it finished")
	}
	home := t.TempDir()
	writeKey(t, m.home, home)
	if _, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home}); err == nil ||
		!strings.Contains(err.Error(), "holds a restore that did not finish") || !strings.Contains(err.Error(), "run mesh restore with the same backup again") {
		t.Fatalf("a controller on a partial restore: %v", err)
	}

	n, from, err := st.Import(ctx, manifest, bytes.NewReader(backup.Bytes()))
	if err != nil || from < 2 || n+from-1 != manifest.Messages {
		t.Fatalf("the restore again: published %d from %d of %d: %v", n, from, manifest.Messages, err)
	}
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatalf("a controller on the finished restore: %v", err)
	}
	defer ctrl.Close()
	got, err := ctrl.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	if len(got.Nodes) != len(want.Nodes) || got.Checkpoint != want.Checkpoint {
		t.Fatalf("restored mesh: %d nodes at %d, backed up %d at %d", len(got.Nodes), got.Checkpoint, len(want.Nodes), want.Checkpoint)
	}
	for i := range want.Nodes {
		if got.Nodes[i].Name != want.Nodes[i].Name || got.Nodes[i].Digest != want.Nodes[i].Digest {
			t.Fatalf("restored %+v, backed up %+v", got.Nodes[i], want.Nodes[i])
		}
	}
}

// An older backup restored while agents run (rule 26, issue 12): a running
// agent notices its log went back, records its report key in the restored
// log (which may not hold it), and the mesh converges on the next pushes:
// the agent refuses what it already applied, naming the highest sequence,
// and the push after is numbered above it and applied.
func TestAnOlderBackupRestoredUnderRunningAgents(t *testing.T) {
	t.Parallel() // its own bus, home and agent; mostly waiting: beside the others
	ctx := context.Background()
	m := newTrustMesh(t, true)
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	// The backup, taken before the agent ever started: it holds no report key.
	var backup bytes.Buffer
	manifest, err := m.h.Core.Store.Export(ctx, &backup)
	m.must(err)
	m.runAgent("web-1", t.TempDir())
	m.pushAndWait("web-1")
	last := m.pushAndWait("web-1")

	// Restore the older backup into the same bus, under the running agent.
	st, err := m.h.Core.Store.Replace(ctx, store.StreamConfig{})
	m.must(err)
	_, _, err = st.Import(ctx, manifest, bytes.NewReader(backup.Bytes()))
	m.must(err)
	m.start()
	r, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"})
	m.must(err)
	p := r.Sent[0]
	if err := client.WaitReport(ctx, m.h.Core.Store, m.h.Status, "web-1", p.Digest, p.StreamSeq, reportWait); err == nil ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("the first push after the restore (sequence %d, the agent applied %d): %v", p.Sequence, last.Sequence, err)
	}
	m.settle() // the refusal folded: the next push reads its highest
	next := m.pushAndWait("web-1")
	if next.Sequence != last.Sequence+1 {
		t.Fatalf("the push after the refusal is sequence %d, want %d", next.Sequence, last.Sequence+1)
	}
	m.settle()
	s, err := m.h.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	if !s.Well {
		t.Fatalf("the mesh after an older backup under running agents: %+v", s)
	}
}

// A restore keeps the log's own sequence of events whatever the bus's
// duplicates window (rule 26, issue 28): an agent that restarted minutes
// after its first start recorded its report key again under the same
// Nats-Msg-Id (agents did, before their key's id changed at every start),
// and a restore that republished it inside the window was answered
// "duplicate", stored nothing, and then waited for ever. Such a log
// restores whole into a fresh bus, and the controller serves it.
func TestARepeatedMessageIDRestores(t *testing.T) {
	t.Parallel() // its own buses and homes; mostly waiting: beside the others
	ctx := context.Background()
	m := newTrustMesh(t, false)
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	m.runAgent("web-1", t.TempDir())
	m.pushAndWait("web-1")
	key, found, err := m.h.Core.Store.Last(ctx, events.ReportSubject("web-1", "ReportKeyRecorded"))
	if err != nil || !found || key.Header.Get(jetstream.MsgIDHeader) == "" {
		t.Fatalf("the agent's key record: found %t, %v, headers %v", found, err, key.Header)
	}
	// The same record again, under its id, once the source stream no
	// longer remembers that id: as the log of a restarted agent holds it.
	js := m.h.Core.Store.JetStream()
	info, err := js.Stream(ctx, m.h.Core.Store.Name())
	m.must(err)
	cfg := info.CachedInfo().Config
	// Cut twice, to 200 ms and then to 100 ms (the least the server
	// takes). An update fires the bus's purge of ids at once but takes
	// the new window only after (nats-server 2.15, stream.go's update):
	// a purge that ran between, which a loaded box lets happen, still
	// held the 2 minutes and set its next purge 2 minutes on, and this
	// test waited out its 30 s. The second cut's purge runs with a short
	// window on either side of that gap.
	for _, window := range []time.Duration{200 * time.Millisecond, 100 * time.Millisecond} {
		cfg.Duplicates = window
		_, err = js.UpdateStream(ctx, cfg)
		m.must(err)
	}
	embeddedtest.Eventually(t, "the key record stored again under its id", func() bool {
		again := nats.NewMsg(key.Subject)
		again.Data, again.Header = key.Data, key.Header
		ack, err := js.PublishMsg(ctx, again)
		m.must(err)
		return !ack.Duplicate
	})
	want := m.pushAndWait("web-1") // events after the repeat
	m.settle()
	var backup bytes.Buffer
	manifest, err := m.h.Core.Store.Export(ctx, &backup)
	m.must(err)
	if n := bytes.Count(backup.Bytes(), []byte(`"Nats-Msg-Id":["`+key.Header.Get(jetstream.MsgIDHeader)+`"]`)); n != 2 {
		t.Fatalf("the backup holds the key's id %d time(s), want 2", n)
	}

	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	st, _, err := store.Open(ctx, nc, store.StreamConfig{})
	m.must(err)
	done := make(chan error, 1)
	go func() { _, _, err := st.Import(ctx, manifest, bytes.NewReader(backup.Bytes())); done <- err }()
	var ierr error
	embeddedtest.Eventually(t, "the restore to return", func() bool {
		select {
		case ierr = <-done:
			return true
		default:
			return false
		}
	})
	if ierr != nil {
		t.Fatalf("the restore of a log with a repeated id: %v", ierr)
	}
	state, err := st.State(ctx)
	m.must(err)
	if state.LastSeq != manifest.LastSeq || state.Msgs != manifest.Messages {
		t.Fatalf("restored %d event(s) up to %d, backed up %d up to %d", state.Msgs, state.LastSeq, manifest.Messages, manifest.LastSeq)
	}
	home := t.TempDir()
	writeKey(t, m.home, home)
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: home})
	if err != nil {
		t.Fatalf("a controller on the restored log: %v", err)
	}
	defer ctrl.Close()
	m.must(ctrl.Core.Proj.WaitFor(ctx, manifest.LastSeq))
	s, err := ctrl.Status.Status(ctx, wire.StatusRequest{})
	m.must(err)
	if len(s.Nodes) != 1 || s.Nodes[0].Digest != want.Digest || s.Nodes[0].State != wire.StateCurrent ||
		strings.Contains(strings.Join(s.Causes, " "), "foreign") {
		t.Fatalf("the restored mesh: %+v", s)
	}
	// An append that checks its own retry reads the restored id back.
	last, err := st.Get(ctx, key.Seq)
	m.must(err)
	if store.MsgID(last.Header) != key.Header.Get(jetstream.MsgIDHeader) {
		t.Fatalf("the restored key record's id: %v", last.Header)
	}
}

// A log that went back can number the next declaration as it numbered the
// one an agent read: here an older backup is restored and the log filled
// to the same length, so the next push's declaration for web-1 is stored
// as the very event the agent applied, with other content. An agent that
// knew the message by its event number only took it for the one it had,
// said nothing, and stayed behind, connected, until a later push (the
// fleet's bus restarts met this about once in twenty runs). It must read
// it and answer: here it refuses it, the push's sequence having gone back
// with the log.
func TestAnAgentIsNotFooledByAnEventNumberUsedTwice(t *testing.T) {
	t.Parallel() // its own bus, home and agent; mostly waiting: beside the others
	ctx := context.Background()
	m := newTrustMesh(t, true)
	_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: "web-1"})
	m.must(err)
	var backup bytes.Buffer
	manifest, err := m.h.Core.Store.Export(ctx, &backup)
	m.must(err)
	// Room after the backup for what the restored log will need before
	// its push: a module and an assignment.
	for i := range 10 {
		_, err := m.h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: fmt.Sprintf("early-%d", i)})
		m.must(err)
	}
	m.runAgent("web-1", t.TempDir())
	first := m.pushAndWait("web-1")
	// The agent reports its machine's facts once it follows, unasked: in
	// the log before it is replaced, not into the new stream (a loaded box
	// delayed it past the replacement, and the restore refused a stream
	// that held it).
	embeddedtest.Eventually(t, "web-1's facts in the read models", func() bool {
		found := false
		m.must(m.h.Core.Proj.Read(func(v *projections.View) (err error) {
			_, found, err = v.NodeFacts("web-1")
			return err
		}))
		return found
	})

	// The controller stopped while the log is replaced, as mesh restore
	// wants it: its own writes (a node heard again) would land between.
	m.ctrl.Close()
	// And started again hearing no one: a node heard again is an event of
	// the controller's, which landed among the padding at times.
	m.deaf = true
	st, err := m.h.Core.Store.Replace(ctx, store.StreamConfig{})
	m.must(err)
	_, _, err = st.Import(ctx, manifest, bytes.NewReader(backup.Bytes()))
	m.must(err)
	m.start()
	// Other content than the declaration the agent applied.
	_, err = m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json",
		Manifest: `{"module":"motd","resources":[{"kind":"file","path":"/etc/motd","mode":"0644","content":"after\n"}]}`})
	m.must(err)
	_, err = m.h.Nodes.Assign(ctx, wire.AssignRequest{CommandID: wire.NewCommandID(), Node: "web-1", Module: "motd"})
	m.must(err)
	for i := 0; ; i++ {
		now, err := m.h.Core.Store.State(ctx)
		m.must(err)
		// A push to one node appends its declaration only.
		if now.LastSeq >= first.StreamSeq-1 {
			if now.LastSeq > first.StreamSeq-1 {
				var subjects []string
				for q := uint64(first.StreamSeq - 3); q <= now.LastSeq; q++ {
					if msg, err := m.h.Core.Store.Get(ctx, q); err == nil {
						subjects = append(subjects, fmt.Sprintf("%d %s", q, msg.Subject))
					}
				}
				t.Fatalf("the restored log is at event %d, past the %d before the first declaration: the test cannot line the events up: %v", now.LastSeq, first.StreamSeq-1, subjects)
			}
			break
		}
		// One event each (an enrolment is two: the node and its token).
		_, err = m.h.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "m.json",
			Manifest: fmt.Sprintf(`{"module":"pad-%d","resources":[]}`, i)})
		m.must(err)
	}
	m.settle()
	r, err := m.h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Node: "web-1"})
	m.must(err)
	p := r.Sent[0]
	if p.StreamSeq != first.StreamSeq || p.Digest == first.Digest {
		t.Fatalf("the push after the restore is event %d (digest %s); the test needs event %d with other content than %s", p.StreamSeq, p.Digest, first.StreamSeq, first.Digest)
	}
	if err := client.WaitReport(ctx, m.h.Core.Store, m.h.Status, "web-1", p.Digest, p.StreamSeq, reportWait); err == nil ||
		!strings.Contains(err.Error(), "refused") {
		t.Fatalf("the agent on a declaration stored as event %d, the number of the one it applied: %v", p.StreamSeq, err)
	}
}
