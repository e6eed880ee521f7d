package liveness

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/nats-io/nkeys"
)

// hearAt hears node's beat said at said, heard at now, as beatOf does once
// its MAC held.
func hearAt(l *hearing, node string, now time.Time, said int64) {
	b, ok := l.heard[node]
	l.hear(node, b, ok, now, said)
}

// Silence counts only while this controller could hear: a gap between
// its checks (a SIGSTOP, a paused VM) left every beat unread, and calling
// every node lost then wrote a loss and a return for each of them. After
// the gap, silence counts from the check that noticed it; a node silent
// past the bound from there is lost, and one recorded lost and heard
// since comes back.
func TestSilenceCountsOnlyWhileTheControllerRan(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	l := &hearing{bound: 20 * time.Second, nc: nc, heard: map[string]beat{"web-1": {at: t0}},
		lost:  map[string]projections.Liveness{"db-1": {Node: "db-1", Unreachable: true, Since: t0.Add(-time.Hour)}},
		known: map[string]time.Time{}, hearing: t0, reconnects: nc.Stats().Reconnects, checked: time.Now()}
	names := func(cs []change) (out []string) {
		for _, c := range cs {
			out = append(out, c.node+" "+c.ev.EventType())
		}
		return out
	}
	// The process stood still for ten seconds, the clock ran on 25.
	l.checked = time.Now().Add(-10 * time.Second)
	if got := names(l.changes(t0.Add(25 * time.Second))); len(got) != 0 {
		t.Fatalf("after a stall: %v, want no change", got)
	}
	// Running again: web-1 is silent for the bound from then.
	if got := names(l.changes(t0.Add(40 * time.Second))); len(got) != 0 {
		t.Fatalf("within the bound after the stall: %v", got)
	}
	if got := names(l.changes(t0.Add(46 * time.Second))); len(got) != 1 || got[0] != "web-1 NodeUnreachable" {
		t.Fatalf("past the bound after the stall: %v, want web-1 lost", got)
	}
	// db-1, recorded lost an hour ago, is heard: it comes back.
	hearAt(l, "db-1", t0.Add(47*time.Second), 1)
	if got := names(l.changes(t0.Add(48 * time.Second))); len(got) != 2 || got[1] != "db-1 NodeReachable" && got[0] != "db-1 NodeReachable" {
		t.Fatalf("db-1 heard again: %v", got)
	}
}

// A node this controller heard and then recorded lost is not lost again
// at each check while it stays silent, and comes back at its next beat;
// back, it is watched for silence again. The log's word on it is kept in
// its beat (settle): without that, every check wrote its loss once more.
// A beat heard before the first check of a node the log has lost (load)
// is that node coming back.
func TestALostNodeHeardIsWatchedForItsReturnAlone(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	l := &hearing{bound: 20 * time.Second, nc: nc, heard: map[string]beat{}, lost: map[string]projections.Liveness{},
		known: map[string]time.Time{}, hearing: t0, reconnects: nc.Stats().Reconnects, checked: time.Now()}
	at := func(d time.Duration) time.Time { return t0.Add(d * time.Second) }
	check := func(now time.Time, want ...string) {
		t.Helper()
		l.checked = time.Now() // no stall: the test's clock is its own
		var got []string
		for _, c := range l.changes(now) {
			got = append(got, c.node+" "+c.ev.EventType())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("at %s: %v, want %v", now.Sub(t0), got, want)
		}
	}
	hearAt(l, "web-1", at(1), 1)
	check(at(15))
	check(at(22), "web-1 NodeUnreachable")
	l.settle("web-1", projections.Liveness{Node: "web-1", Unreachable: true, LastHeard: at(1), Since: at(22)})
	check(at(23))
	check(at(60))
	hearAt(l, "web-1", at(61), 2)
	check(at(62), "web-1 NodeReachable")
	l.settle("web-1", projections.Liveness{Node: "web-1", LastHeard: at(61), Since: at(62)})
	check(at(63))
	check(at(82), "web-1 NodeUnreachable")

	// Lost in the log before this controller's first check, heard first.
	l2 := &hearing{bound: 20 * time.Second, nc: nc, heard: map[string]beat{}, lost: map[string]projections.Liveness{},
		known: map[string]time.Time{}, hearing: t0, reconnects: nc.Stats().Reconnects, checked: time.Now()}
	hearAt(l2, "db-1", at(5), 1)
	l2.took(map[string]projections.Liveness{"db-1": {Node: "db-1", Unreachable: true, Since: at(-3600)}},
		map[string]time.Time{"web-2": at(-7200)})
	l = l2
	check(at(6), "db-1 NodeReachable")
	l.settle("db-1", projections.Liveness{Node: "db-1", LastHeard: at(5), Since: at(6)})
	// web-2, which the log says spoke an hour before this controller
	// began to hear, beats: it is watched by its beat from then on, not
	// by what the log said (a node of both was lost while it beat, after
	// every restart).
	hearAt(l, "web-2", at(10), 1)
	hearAt(l, "db-1", at(24), 2)
	check(at(25))
	check(at(31), "web-2 NodeUnreachable")
}

// keyedHearing is a hearing on a bus of its own, its clock *now, and the
// keyring of a new controller key its beats are checked with.
func keyedHearing(t *testing.T, now *time.Time) (*hearing, *declaration.Keyring) {
	t.Helper()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	kp, _ := nkeys.CreateAccount()
	keys, err := declaration.NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	l := &hearing{bound: 20 * time.Second, nc: nc, now: func() time.Time { return *now }, heard: map[string]beat{},
		lost: map[string]projections.Liveness{}, known: map[string]time.Time{}, hearing: *now,
		reconnects: nc.Stats().Reconnects, checked: time.Now()}
	return l, keys
}

// A beat is heard under either of its node's keys and under no other, a
// replay of one heard is not heard again, and the key that held is kept
// to be tried first next time (only an accepted beat's, not a stranger's
// or a replay's). Fails when a forged or replayed beat is heard,
// when either key is not, or when the order is not kept.
func TestABeatIsHeardUnderItsNodesKeysAloneAndOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := t0
	l, keys := keyedHearing(t, &now)
	said := t0
	beatOf := func(node string, key []byte) (heard bool, payload []byte) {
		now, said = now.Add(time.Second), said.Add(time.Second)
		subject := events.LivenessPrefix + "." + node
		payload = declaration.Beat(key, subject, said)
		return l.beatOf(keys, node, subject, payload), payload
	}
	// Strangers' keys, at a node never heard and at one heard.
	strangers := map[string][]byte{"web-2's beat key": keys.NodeBeat("web-2"), "web-2's report MAC key": keys.NodeMAC("web-2"),
		"the log's MAC key": keys.LogMAC(), "no key": nil}
	for name, key := range strangers {
		if heard, _ := beatOf("web-1", key); heard {
			t.Errorf("web-1, never heard, heard under %s", name)
		}
	}
	if _, ok := l.heard["web-1"]; ok {
		t.Fatal("web-1 is in heard after strangers' beats alone")
	}
	var prev []byte // the beat accepted before, under the same key or the other
	for i, derived := range []bool{true, false, false, true, true, false} {
		key := keys.NodeBeat("web-1")
		if derived {
			key = keys.NodeMAC("web-1")
		}
		heard, payload := beatOf("web-1", key)
		if !heard || !bytes.Equal(l.heard["web-1"].key, key) {
			t.Fatalf("beat %d (derived key %v): heard %v, kept the key that held %v", i+1, derived, heard, bytes.Equal(l.heard["web-1"].key, key))
		}
		now = now.Add(time.Second)
		if l.beatOf(keys, "web-1", events.LivenessPrefix+".web-1", payload) {
			t.Fatalf("beat %d heard again, replayed", i+1)
		}
		// An older beat, said before this one, is not heard, and does
		// not change the key kept.
		if prev != nil && (l.beatOf(keys, "web-1", events.LivenessPrefix+".web-1", prev) || !bytes.Equal(l.heard["web-1"].key, key)) {
			t.Fatalf("after beat %d, the one before it was heard again or changed the key kept", i+1)
		}
		prev = payload
		for name, stranger := range strangers {
			if heard, _ := beatOf("web-1", stranger); heard || !bytes.Equal(l.heard["web-1"].key, key) {
				t.Fatalf("after beat %d, a beat under %s: heard %v, kept the key that held %v", i+1, name, heard, bytes.Equal(l.heard["web-1"].key, key))
			}
		}
	}
	// The kept key is tried first: a keyring of another controller knows
	// neither of web-1's keys, and web-1's next beat is still heard, under
	// the key its last held.
	other, _ := nkeys.CreateAccount()
	stranger, err := declaration.NewKeyring(other)
	if err != nil {
		t.Fatal(err)
	}
	now, said = now.Add(time.Second), said.Add(time.Second)
	subject := events.LivenessPrefix + ".web-1"
	if !l.beatOf(stranger, "web-1", subject, declaration.Beat(l.heard["web-1"].key, subject, said)) {
		t.Error("a beat under the key kept was not heard without asking the keyring")
	}
}

// A node's first beat heard through beatOf takes what the log says of it:
// one the log has lost comes back, one known to have spoken is watched
// by its beats and not lost while it beats. Fails when beatOf tells hear
// the node was heard before.
func TestAFirstBeatTakesTheLogsWordOnItsNode(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := t0
	l, keys := keyedHearing(t, &now)
	l.lost["db-1"] = projections.Liveness{Node: "db-1", Unreachable: true, Since: t0.Add(-time.Hour)}
	l.known["web-3"] = t0.Add(-time.Minute)
	l.hearing, l.loaded = t0.Add(-time.Minute), true
	for _, node := range []string{"db-1", "web-3"} {
		subject := events.LivenessPrefix + "." + node
		if !l.beatOf(keys, node, subject, declaration.Beat(keys.NodeBeat(node), subject, t0)) {
			t.Fatalf("%s's beat not heard", node)
		}
	}
	var got []string
	for _, c := range l.changes(t0.Add(time.Second)) {
		got = append(got, c.node+" "+c.ev.EventType())
	}
	if !slices.Equal(got, []string{"db-1 NodeReachable"}) {
		t.Fatalf("after db-1 (lost) and web-3 (known) beat: %v, want db-1 back alone", got)
	}
}
