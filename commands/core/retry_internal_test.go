package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

func retryStore(t *testing.T) *store.Store {
	t.Helper()
	st, _, err := store.Open(context.Background(), embeddedtest.Conn(t, embeddedtest.Server(t)), store.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Writers deciding on one aggregate at once, on a real bus: every one reads
// the same version before any appends, so all but one conflict for real, and
// each decides again on the aggregate as the winners left it. Each decision
// lands exactly once, and none meets the bound: a writer conflicts only
// when another's decision landed, and each of the others lands once.
func TestDecideAndAppendLandsEachDecisionOnce(t *testing.T) {
	ctx := context.Background()
	st := retryStore(t)
	agg := events.NodeAggregate("web-1")
	const writers = 16
	var read sync.WaitGroup
	read.Add(writers)
	var rounds atomic.Int32
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			decision := fmt.Sprintf("w-%02d", w)
			errs[w] = DecideAndAppend(ctx, "change", "web-1", nil, func(attempt int) error {
				rounds.Add(1)
				_, version, err := st.Load(ctx, agg)
				if attempt == 0 {
					// A barrier, not a sleep: no writer appends before
					// every writer has read the version all of them expect.
					read.Done()
					read.Wait()
				}
				if err != nil {
					return err
				}
				_, err = st.Append(ctx, agg, version, "decision-"+decision, events.NodeChanged{Name: "web-1", Labels: map[string]string{"decision": decision}})
				return err
			})
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	recs, _, err := st.Load(ctx, agg)
	if err != nil {
		t.Fatal(err)
	}
	landed := map[string]int{}
	for _, r := range recs {
		landed[r.Event.(events.NodeChanged).Labels["decision"]]++
	}
	for w := range writers {
		if n := landed[fmt.Sprintf("w-%02d", w)]; n != 1 {
			t.Errorf("decision w-%02d landed %d times, want once", w, n)
		}
	}
	if len(recs) != writers {
		t.Errorf("%d events on the aggregate, want %d", len(recs), writers)
	}
	// writers-1 lost the first race, and each decided at least once more.
	if got := rounds.Load(); got < 2*writers-1 {
		t.Errorf("%d rounds for %d writers: the conflicts the test is about did not happen", got, writers)
	}
}

// A decision that can never land (it expects a version the aggregate left
// long ago, as a read model whose version does not follow the log would)
// meets the bound and says the one sentence, as a refusal of its own kind
// that crosses the bus as such; nothing is recorded.
func TestDecideAndAppendSaysTheOneSentenceAtTheBound(t *testing.T) {
	t.Parallel() // its own bus; mostly waiting out the retries' backoff: beside the others
	ctx := context.Background()
	st := retryStore(t)
	agg := events.NodeAggregate("web-1")
	seq, err := st.Append(ctx, agg, 0, "enrol-web-1", events.NodeEnrolled{Name: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	var rounds, rereads int
	err = DecideAndAppend(ctx, "change", "web-1", func(context.Context) error { rereads++; return nil }, func(attempt int) error {
		rounds++
		_, err := st.Append(ctx, agg, 0, fmt.Sprintf("stale-%d", attempt), events.NodeChanged{Name: "web-1"})
		return err
	})
	want := fmt.Sprintf("cannot change web-1: other writes moved it %d times in a row while this command decided, so nothing was recorded; "+
		"if others are changing it (mesh events shows them), run this again once they stop; "+
		"if nothing else is, trying again will not help: the controller misreads it, so run mesh projections verify and report this", decideAttempts)
	if err == nil || err.Error() != want {
		t.Fatalf("at the bound:\n got %v\nwant %s", err, want)
	}
	var refusal *aggregates.Error
	if !errors.As(err, &refusal) || !errors.Is(err, aggregates.ErrContended) || aggregates.Kind(err) != "contended" ||
		aggregates.KindNamed(aggregates.Kind(err)) != aggregates.ErrContended || Code(err) != wire.CodeConflict {
		t.Fatalf("the sentence lost its kind: %#v (kind %q, code %s)", err, aggregates.Kind(err), Code(err))
	}
	if rounds != decideAttempts || rereads != decideAttempts-1 {
		t.Fatalf("%d rounds and %d rereads, want %d and %d", rounds, rereads, decideAttempts, decideAttempts-1)
	}
	if _, version, err := st.Load(ctx, agg); err != nil || version != seq {
		t.Fatalf("the aggregate is at %d (%v), want %d: nothing recorded", version, err, seq)
	}
}

// Anything but a conflict is the answer at once, a refusal with its kind
// as it was made; so is a cancelled context between attempts.
func TestDecideAndAppendAnswersAnythingButAConflict(t *testing.T) {
	refused := aggregates.Refuse("enroll", "web-1", aggregates.ErrNameTaken, "a node of that name is enrolled")
	rounds := 0
	err := DecideAndAppend(context.Background(), "enroll", "web-1", nil, func(int) error { rounds++; return refused })
	if err != refused || rounds != 1 {
		t.Fatalf("a refusal: %v after %d rounds, want it as made after one", err, rounds)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = DecideAndAppend(ctx, "enroll", "web-1", nil, func(int) error { cancel(); return fmt.Errorf("append: %w", store.ErrConflict) })
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "other writes") {
		t.Fatalf("cancelled between attempts: %v", err)
	}
}
