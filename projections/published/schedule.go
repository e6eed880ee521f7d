package published

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/events/store"
)

// DefaultEvery is how many events apart a controller publishes a
// snapshot to the bus: a start from one then folds at most this many (and
// the SnapshotEvery between time-travel snapshots), at about 28 CPU µs an
// event on this box's two cores, on top of fetching and opening the
// snapshot (3 to 4 CPU s at ten million events). At 200,000 the tail alone
// cost a start some 6.3 CPU s at worst, over its bound of 5 s; at 100,000
// it is some 3.5. What it costs: the bucket is rewritten each time, a
// snapshot of 391 MiB at ten million events written again for every
// 100,000 events (some 80 MiB of log), and the publisher packs and sends
// it beside the fold (docs/performance.md, "A start from a snapshot on the
// bus").
const DefaultEvery = 100_000

// DefaultAfter bounds the tail by time too: a mesh folding a few events a
// minute would take hours to reach DefaultEvery, and a start would fold
// all of them. Once this long has passed since the last publish, the next
// commit of anything new is published (at ten million events a snapshot
// is some hundreds of MiB, so not much more often).
const DefaultAfter = 5 * time.Minute

// Schedule is when the live fold publishes, and the publish under way:
// one at a time, beside the fold, which never waits for it. The zero
// value never publishes; Open sets how often.
type Schedule struct {
	every uint64
	after time.Duration
	// last is the event the newest snapshot on the bus holds; running is
	// set while one is being published.
	last      atomic.Uint64
	at        atomic.Int64 // when the last publish began (or the engine opened), unix nanoseconds
	running   atomic.Bool
	publishes sync.WaitGroup // a Close waits for the publish it cut
}

// Open sets the schedule: every so many events folded, or, with after
// set, anything new once after has passed since the last publish (0:
// never); counted from the newest snapshot already on st's bus, and from
// now.
func (s *Schedule) Open(ctx context.Context, st *store.Store, every uint64, after time.Duration, now time.Time) {
	s.every, s.after = every, after
	if every > 0 {
		s.at.Store(now.UnixNano())
		if on, err := st.Snapshots(ctx); err == nil && len(on) > 0 {
			s.last.Store(on[len(on)-1].Checkpoint)
		}
	}
}

// Late says the fold, having just committed up to last, should publish
// now for the time since the last publish (after).
func (s *Schedule) Late(last uint64, now time.Time) bool {
	return s.every > 0 && s.after > 0 && last > s.last.Load() && !s.running.Load() &&
		now.Sub(time.Unix(0, s.at.Load())) >= s.after
}

// Maybe publishes through b, beside the fold, once every events were
// folded since the newest snapshot on the bus, or when late (Late); one
// publish at a time, cut when ctx ends.
func (s *Schedule) Maybe(ctx context.Context, b Bus, last uint64, late bool, now time.Time) {
	if s.every == 0 || !late && last < s.last.Load()+s.every || !s.running.CompareAndSwap(false, true) {
		return
	}
	// Counted from the start of a publish: one that takes long does not
	// make the next one due at once.
	s.at.Store(now.UnixNano())
	s.publishes.Add(1)
	go func() {
		defer s.publishes.Done()
		defer s.running.Store(false)
		start := time.Now()
		sn, err := s.Publish(ctx, b)
		if err != nil {
			b.Log.Warn("cannot publish a snapshot of the read models (a new controller folds from further back)", "err", err)
			return
		}
		b.Log.Info("published a snapshot of the read models", "event", sn.Checkpoint, "bytes", sn.Size, "took", time.Since(start).Round(time.Millisecond))
	}()
}

// Publish publishes through b now (Bus.Publish), and counts the next one
// from what it holds.
func (s *Schedule) Publish(ctx context.Context, b Bus) (store.Snapshot, error) {
	sn, err := b.Publish(ctx)
	if err == nil {
		s.last.Store(sn.Checkpoint)
	}
	return sn, err
}

// Publishing says whether a publish is under way.
func (s *Schedule) Publishing() bool { return s.running.Load() }

// Wait waits for the publish under way, if any, to end.
func (s *Schedule) Wait() { s.publishes.Wait() }
