package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/foldtest"
	"github.com/meshctl/mesh/projections/pipeline"
)

// TestMain runs the tests with their temporary directories in memory where
// the box allows (see embeddedtest.Main).
func TestMain(m *testing.M) { os.Exit(embeddedtest.Main(m)) }

// ledger is a folder that keeps what it was handed, in the order it was
// handed, and commits when the read has caught up, as the fold does.
type ledger struct {
	applied   []events.Recorded
	committed int // how many of applied are committed
	failAt    uint64
}

func (l *ledger) Apply(rec events.Recorded, _ *declaration.Head, _ int) error {
	if rec.Seq == l.failAt {
		return &pipeline.FoldError{Seq: rec.Seq, Subject: rec.Subject, Err: errors.New("this folder cannot apply it")}
	}
	l.applied = append(l.applied, rec)
	return nil
}

func (l *ledger) CommitIf(pending uint64) (time.Time, error) {
	if pending > 0 {
		return time.Time{}, nil
	}
	return time.Time{}, l.Commit()
}

func (l *ledger) CommitWanted() error   { return nil }
func (l *ledger) Commit() error         { l.committed = len(l.applied); return nil }
func (l *ledger) Holding() bool         { return l.committed < len(l.applied) }
func (l *ledger) Now() time.Time        { return time.Now() }
func (l *ledger) Wake() <-chan struct{} { return nil }

func (l *ledger) Last() uint64 {
	if len(l.applied) == 0 {
		return 0
	}
	return l.applied[len(l.applied)-1].Seq
}

// enrolled is a stream of n enrolments appended by the controller whose
// keys it answers.
func enrolled(t *testing.T, n int) (*store.Store, *declaration.Keyring) {
	t.Helper()
	keys := foldtest.Keys(t)
	s := foldtest.Stream(t, keys)
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		if _, err := s.Append(context.Background(), events.NodeAggregate(name), 0, "enroll-"+name, events.NodeEnrolled{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	return s, keys
}

func run(ctx context.Context, s *store.Store, keys *declaration.Keyring, o store.ReadOptions, f pipeline.Folder) error {
	return pipeline.Run(ctx, f, keys, func(ctx context.Context, add func(store.Msg) error, flush func()) error {
		o.Idle = flush
		return s.Read(ctx, o, add)
	})
}

// Decoded on many workers, the events reach the folder one by one in
// stream order, each held to its writer's right, and all of them are
// committed when Run returns. Fails when a chunk overtakes another.
func TestEventsReachTheFolderInStreamOrder(t *testing.T) {
	const n = 3*256 + 7 // chunks of 256, and a part of one
	s, keys := enrolled(t, n)
	var l ledger
	if err := run(context.Background(), s, keys, store.ReadOptions{From: 1}, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.applied) != n || l.committed != n {
		t.Fatalf("%d events applied and %d committed, want %d", len(l.applied), l.committed, n)
	}
	for i, rec := range l.applied {
		if rec.Seq != uint64(i+1) || rec.Foreign != nil {
			t.Fatalf("event %d handed as %d (foreign: %v), want %d, the controller's", i+1, rec.Seq, rec.Foreign, i+1)
		}
	}
}

// An event the folder cannot apply stops the fold there: what came before
// is committed, nothing after is applied, and a following read ends rather
// than waiting for events that may never come. Fails when the read keeps
// following until the deadline, or the failure is lost.
func TestAFailureCommitsWhatCameBeforeAndEndsTheRead(t *testing.T) {
	s, keys := enrolled(t, 600)
	l := ledger{failAt: 300}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx, s, keys, store.ReadOptions{From: 1, Follow: true}, &l)
	if ctx.Err() != nil {
		t.Fatal("the following read ended only at the test's deadline, not at the failure")
	}
	var fe *pipeline.FoldError
	if !errors.As(err, &fe) || fe.Seq != 300 {
		t.Fatalf("Run answered %v, want the fold stopped at event 300", err)
	}
	if len(l.applied) != 299 || l.committed != 299 {
		t.Fatalf("%d events applied and %d committed, want the 299 before the failure", len(l.applied), l.committed)
	}
}

// counting is a ledger that says how many events it has committed, to a
// reader beside the fold.
type counting struct {
	ledger
	committed atomic.Int64
}

func (c *counting) CommitIf(pending uint64) (time.Time, error) {
	due, err := c.ledger.CommitIf(pending)
	c.committed.Store(int64(c.ledger.committed))
	return due, err
}

// A message that says more follow is held until they come; a flush (the
// read saying nothing came after all) hands it on, and it is committed as
// the last there is. The own read flushes when it has handed nothing on
// for a while, so a count too high holds the fold a moment: without the
// flush, a push waiting for its last send waited for ever. So does a chunk
// that went to the folder full, ending on such a message. Fails when a
// flush hands on nothing, or what it hands on is not committed.
func TestAFlushHandsOnAndCommitsAMessageSaidToHaveMoreAfterIt(t *testing.T) {
	for _, n := range []int{1, 256} { // a part of a chunk, and a whole one
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, keys := enrolled(t, n)
			var msgs []store.Msg
			if err := s.Read(context.Background(), store.ReadOptions{From: 1}, func(m store.Msg) error {
				msgs = append(msgs, m)
				return nil
			}); err != nil || len(msgs) != n {
				t.Fatalf("read %d message(s), %v; want %d enrolments", len(msgs), err, n)
			}
			var c counting
			err := pipeline.Run(context.Background(), &c, keys, func(_ context.Context, add func(store.Msg) error, flush func()) error {
				for _, m := range msgs {
					m.Pending = 5 // said to have more after it, which never come
					if err := add(m); err != nil {
						return err
					}
				}
				flush()
				embeddedtest.Eventually(t, "what was flushed to be applied and committed while the read goes on", func() bool {
					return c.committed.Load() == int64(n)
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
