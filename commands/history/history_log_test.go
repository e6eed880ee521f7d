package history_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/mesh/agent/agenttest"
	"github.com/meshctl/mesh/embedded/embeddedtest"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestHistoryAndAudit(t *testing.T) {
	m := agenttest.New(t)
	m.Enroll("db-1", "linux")
	m.Enroll("app-1", "linux")
	m.Agent("app-1")
	m.Register("postgres.json")
	m.Register("app.json")
	m.Assign("db-1", "postgres", map[string]string{"password": "x"})
	m.Assign("app-1", "app", nil)
	for _, port := range []string{"", "6000", "7000"} {
		if port != "" {
			m.Assign("db-1", "postgres", map[string]string{"password": "x", "port": port})
		}
		s := m.Push("app-1").Sent[0]
		m.Report("app-1", s.Digest)
	}
	// Twice the same hand-written content, then the composed content again:
	// the second is no change, which history tells from the index without
	// reading it back, and the push after it is diffed against it.
	for range 2 {
		_, err := m.H.Push.Declare(m.Ctx, wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: "app-1", File: "f.json",
			Body: `{"resources":[{"kind":"file","path":"/etc/hand","mode":"0644","content":"x"}]}`})
		m.Must(err)
	}
	m.Push("app-1")
	h, err := m.H.History.History(m.Ctx, wire.HistoryRequest{Node: "app-1", Diff: true})
	m.Must(err)
	if diff := cmp.Diff(historyFromLog(t, m, h.Entries), h.Entries); diff != "" {
		t.Fatalf("history from the index is not what the log says (-log +history):\n%s", diff)
	}
	// The agent's reports interleave with these as it applies them.
	var sent []int
	for i, e := range h.Entries {
		if e.Kind == "declaration" {
			sent = append(sent, i)
		}
	}
	n := len(sent)
	if n != 6 || len(h.Entries[sent[n-1]].Changes) == 0 || len(h.Entries[sent[n-2]].Changes) != 0 || len(h.Entries[sent[n-3]].Changes) == 0 {
		t.Fatalf("the two hand declarations and the push after them: %+v", h.Entries[sent[n-3]:])
	}
	h.Entries = h.Entries[:sent[n-3]]
	var decls, applied int
	var lastChanges []string
	for _, e := range h.Entries {
		switch e.Kind {
		case "declaration":
			decls++
			lastChanges = nil
			for _, c := range e.Changes {
				lastChanges = append(lastChanges, c.Path+" "+c.Change+" "+strings.Join(c.Lines, "|"))
			}
		case "applied":
			applied++
		}
	}
	if decls != 3 || applied != 3 {
		t.Fatalf("history: %d declarations, %d applied: %+v", decls, applied, h.Entries)
	}
	if len(lastChanges) != 1 || !strings.Contains(lastChanges[0], "/etc/app/app.conf changed") ||
		!strings.Contains(lastChanges[0], "- database = db-1:6000|+ database = db-1:7000") {
		t.Fatalf("the last declaration's diff: %v", lastChanges)
	}
	rep, err := m.H.History.Audit(m.Ctx, wire.AuditRequest{Node: "app-1"})
	m.Must(err)
	if a := rep.Nodes[0]; !rep.OK || a.Declarations != 6 {
		t.Fatalf("audit: %+v", rep)
	}

	// Copy the stream to another bus with a plain NATS client, editing the
	// second declaration's payload on the way, and audit the copy.
	target := embeddedtest.Server(t)
	tnc := embeddedtest.Conn(t, target)
	if _, _, err := store.Open(m.Ctx, tnc, store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	tjs, _ := jetstream.New(tnc)
	var tampered uint64
	seen := 0
	m.Must(m.H.Core.Store.Read(m.Ctx, store.ReadOptions{}, func(msg store.Msg) error {
		data := msg.Data
		if strings.HasSuffix(msg.Subject, "app-1.DeclarationSent") {
			if seen++; seen == 2 {
				env, ev, err := events.Decode(data)
				if err != nil {
					return err
				}
				sent := ev.(events.DeclarationSent)
				sent.Declaration = bytes.Replace(sent.Declaration, []byte("db-1:6000"), []byte("evil:6000"), 1)
				if data, err = events.Encode(env.Aggregate, env.CommandID, env.By, 0, env.OccurredAt, sent); err != nil {
					return err
				}
				tampered = msg.Seq
			}
		}
		// As restore does: every header but the expectations and an
		// atomic batch's own (a token's use and a node's keys are one).
		out := nats.NewMsg(msg.Subject)
		out.Data = data
		for k, v := range msg.Header {
			if !strings.HasPrefix(k, "Nats-Expected") && !strings.HasPrefix(k, "Nats-Batch-") {
				out.Header[k] = v
			}
		}
		if _, err := tjs.PublishMsg(m.Ctx, out); err != nil {
			return fmt.Errorf("copying event %d on %s: %w", msg.Seq, msg.Subject, err)
		}
		return nil
	}))
	home := t.TempDir()
	key, err := os.ReadFile(filepath.Join(m.Home, commands.KeyFile))
	m.Must(err)
	m.Must(os.WriteFile(filepath.Join(home, commands.KeyFile), key, 0o600))
	copyCtrl, err := commands.StartController(context.Background(), tnc, commands.ControllerConfig{Home: home})
	m.Must(err)
	defer copyCtrl.Close()
	// The edited send no longer carries the controller's MAC: the copy's
	// fold set it aside, audit names it, and the chain breaks after it.
	rep, err = copyCtrl.History.Audit(m.Ctx, wire.AuditRequest{Node: "app-1"})
	m.Must(err)
	if a := rep.Nodes[0]; rep.OK || len(a.Foreign) != 1 || a.Foreign[0].Seq != tampered || !strings.Contains(a.Foreign[0].Reason, "MAC") ||
		!strings.Contains(a.Break, "chains to") {
		t.Fatalf("audit of the edited copy (edited event %d): %+v", tampered, rep)
	}
}

// historyFromLog is what history shows of entries, read from the log itself:
// each event by its sequence, every declaration decoded whole, and each
// diffed against the declaration before it.
func historyFromLog(t *testing.T, m *agenttest.Mesh, entries []wire.HistoryEntry) []wire.HistoryEntry {
	t.Helper()
	var out []wire.HistoryEntry
	var previous *compose.Declaration
	for _, e := range entries {
		msg, err := m.H.Core.Store.Get(m.Ctx, e.Seq)
		m.Must(err)
		env, ev, err := events.Decode(msg.Data)
		m.Must(err)
		w := wire.HistoryEntry{Seq: e.Seq, At: env.OccurredAt}
		switch ev := ev.(type) {
		case events.DeclarationSent:
			var d declaration.Declaration
			m.Must(json.Unmarshal(ev.Declaration, &d))
			c := d.Content()
			w.Kind, w.Sequence, w.Digest, w.By, w.Resources, w.Builds = "declaration", ev.Sequence, ev.Digest, ev.By, ev.Resources, c.Modules
			w.Operator = env.By
			w.Changes, previous = compose.Diff(previous, &c), &c
		case events.DeclarationApplied:
			w.Kind, w.Sequence, w.Digest, w.Changed = "applied", ev.Sequence, ev.Digest, ev.Changed
		case events.DeclarationFailed:
			w.Kind, w.Sequence, w.Digest, w.Failed = "failed", ev.Sequence, ev.Digest, ev.Failed
		case events.DeclarationRefused:
			w.Kind, w.Sequence, w.Digest, w.Reason, w.Highest = "refused", ev.Sequence, ev.Digest, ev.Reason, ev.Highest
		default:
			t.Fatalf("history shows event %d, a %s", e.Seq, ev.EventType())
		}
		out = append(out, w)
	}
	return out
}
