package verdict

import (
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Rules 10 and 14, one state a node: each row fails when the state, its since or
// its detail changes.
func TestStateOf(t *testing.T) {
	enrolled := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sentAt, repAt := enrolled.Add(time.Hour), enrolled.Add(2*time.Hour)
	sent := &wire.Sent{Digest: "d1", ContentDigest: "c1", At: sentAt}
	would := Would{Composable: true, ContentDigest: "c1"}
	hand := &wire.Sent{Digest: "d1", ContentDigest: "c0", By: events.ByHand, At: sentAt}
	report := func(o events.Outcome, digest string) *wire.Report {
		return &wire.Report{Outcome: o, Digest: digest, At: repAt, Reason: "why",
			Failed: []events.ResourceFailure{{Path: "/a", Reason: "denied"}, {Path: "/b", Reason: "x"}}}
	}
	cases := []struct {
		name   string
		sent   *wire.Sent
		rep    *wire.Report
		would  Would
		state  wire.State
		since  time.Time
		detail string
	}{
		{"cannot be composed comes first", sent, report(events.OutcomeApplied, "d1"), Would{Reason: "needs linux"}, wire.StateCannotCompose, enrolled, "needs linux"},
		{"cannot be composed since it was found so, not since enrolment", sent, report(events.OutcomeApplied, "d1"), Would{Reason: "needs linux", Since: repAt.Add(time.Hour)}, wire.StateCannotCompose, repAt.Add(time.Hour), "needs linux"},
		{"never sent", nil, nil, would, wire.StateNeverSent, enrolled, ""},
		{"behind: would be sent other content", sent, report(events.OutcomeApplied, "d1"), Would{Composable: true, ContentDigest: "c2"}, wire.StateBehind, sentAt, "what it would be sent now differs from what it was sent"},
		{"a hand declaration not yet applied is waiting", hand, nil, would, wire.StateWaiting, sentAt, ""},
		{"a hand declaration applied is held, not behind", hand, report(events.OutcomeApplied, "d1"), would, wire.StateHeld, repAt, HandHeldWhy},
		{"held whether or not the mesh could compose it", hand, report(events.OutcomeApplied, "d1"), Would{Reason: "needs linux"}, wire.StateHeld, repAt, HandHeldWhy},
		{"a hand declaration that failed says so", hand, report(events.OutcomeFailed, "d1"), would, wire.StateFailed, repAt, "/a: denied (and 1 more)"},
		{"waiting: no report", sent, nil, would, wire.StateWaiting, sentAt, ""},
		{"waiting: a report on an older send", sent, report(events.OutcomeApplied, "d0"), would, wire.StateWaiting, sentAt, ""},
		{"failed", sent, report(events.OutcomeFailed, "d1"), would, wire.StateFailed, repAt, "/a: denied (and 1 more)"},
		{"refused", sent, report(events.OutcomeRefused, "d1"), would, wire.StateRefused, repAt, "why"},
		{"current", sent, report(events.OutcomeApplied, "d1"), would, wire.StateCurrent, repAt, ""},
	}
	for _, c := range cases {
		state, since, detail := StateOf(enrolled, c.sent, c.rep, c.would)
		if state != c.state || !since.Equal(c.since) || detail != c.detail {
			t.Errorf("%s: %s since %s (%q), want %s since %s (%q)", c.name, state, since, detail, c.state, c.since, c.detail)
		}
	}
}

// The mesh is well only with nothing named: each count alone makes it not.
func TestWell(t *testing.T) {
	if !Well(Counts{}) {
		t.Fatal("nothing named, and not well")
	}
	for _, c := range []Counts{{NotWell: 1}, {ProgramsDown: 1}, {Standings: 1}, {Causes: 1}} {
		if Well(c) {
			t.Errorf("%+v is well", c)
		}
	}
}
