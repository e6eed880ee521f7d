package aggregates

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
)

// A rotation opens an overlap only with a positive bound, which it
// records from now; a negative one is refused. Fails when the bound is
// not recorded, or recorded for --overlap 0.
func TestDecideRotationOpensTheOverlap(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ends := []RotationEnd{{Node: "app-1"}, {Node: "db-1"}}
	ev, err := DecideRotation("postgres", "app", 0, true, ends, DefaultOverlap, now)
	if err != nil || !ev.OverlapUntil.Equal(now.Add(24*time.Hour)) || ev.Generation != 1 {
		t.Fatalf("with the default overlap: %+v %v", ev, err)
	}
	if ev, err := DecideRotation("postgres", "app", 0, true, ends, 0, now); err != nil || !ev.OverlapUntil.IsZero() {
		t.Fatalf("with no overlap: %+v %v", ev, err)
	}
	if _, err := DecideRotation("postgres", "app", 0, true, ends, -time.Hour, now); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "0 for none") {
		t.Fatalf("a negative overlap: %v", err)
	}
}

// Each stage of a rotation, and when its overlap ends: given the overlap
// as the read models hold it, the provider's ends and the time, expect the
// completion (with its reason and ends), nothing yet, or a refusal naming
// the end that cannot be told. Each row fails when the decision changes.
func TestDecideCompletion(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	until := at.Add(time.Hour)
	open := Overlap{Provider: "postgres", Consumer: "app", Generation: 3, Until: until}
	providers := []RotationEnd{{Node: "db-1"}, {Node: "db-2"}}
	with := func(f func(*Overlap)) Overlap { o := open; f(&o); return o }
	cases := []struct {
		name   string
		o      Overlap
		ends   []RotationEnd
		now    time.Time
		stage  Stage
		ok     bool
		reason events.CompletionReason
		kind   error
	}{
		{"no overlap opened: nothing, ever", with(func(o *Overlap) { o.Until = time.Time{} }), providers, until.Add(time.Hour), StageAtOnce, false, "", nil},
		{"completed already: nothing", with(func(o *Overlap) { o.Completed = true }), providers, until.Add(time.Hour), StageCompleted, false, "", nil},
		{"a consumer end pending, bound ahead: nothing yet", with(func(o *Overlap) { o.Pending = []string{"app-1"} }), providers, at, StageOverlap, false, "", nil},
		{"every consumer end applied: completed, applied", open, providers, at, StageOverlap, true, events.CompletedApplied, nil},
		{"a consumer end pending, bound reached: completed, bound passed", with(func(o *Overlap) { o.Pending = []string{"app-1"} }), providers, until, StageOverlap, true, events.CompletedBoundPassed, nil},
		{"applied and past the bound: applied wins", open, providers, until.Add(time.Minute), StageOverlap, true, events.CompletedApplied, nil},
		{"a provider end cannot be composed: refused, the overlap holds", open, []RotationEnd{{Node: "db-1"}, {Node: "db-2", Problem: "postgres is left out"}}, at, StageOverlap, false, "", ErrUncomposable},
	}
	for _, c := range cases {
		if got := c.o.Stage(); got != c.stage {
			t.Errorf("%s: stage %v, want %v", c.name, got, c.stage)
		}
		ev, ok, err := DecideCompletion(c.o, c.ends, c.now)
		switch {
		case c.kind != nil:
			if !errors.Is(err, c.kind) || ok || !strings.Contains(err.Error(), "db-2: postgres is left out") || !strings.Contains(err.Error(), "the old credential stays accepted") {
				t.Errorf("%s: %+v %v %v, want a refusal of kind %v naming db-2", c.name, ev, ok, err, c.kind)
			}
		case err != nil || ok != c.ok:
			t.Errorf("%s: %+v %v %v, want ok %v", c.name, ev, ok, err, c.ok)
		case ok && (ev.Reason != c.reason || ev.Generation != 3 || ev.Provider != "postgres" || ev.Consumer != "app" || !slices.Equal(ev.ProviderEnds, []string{"db-1", "db-2"})):
			t.Errorf("%s: %+v, want reason %q at generation 3 to db-1 and db-2", c.name, ev, c.reason)
		}
	}
}
