package core

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// The collector's setting is made here alone, from three things: whether a
// long fold runs (FoldingGC), whether one runs beside the live generation
// (BesideGC), and how large the live heap is (KeepHeapGoal). GOGC, when
// given, wins over all three.

// FoldingGC lets the collector run half as often while a long fold runs (a
// start's catch-up, a rebuild), unless GOGC says otherwise, and answers what
// puts it back once no long fold runs. A fold's live heap is small and its
// garbage large, so the collector ran often for little: a million real
// events caught up in 15.1-16.0 s with the default and 13.4-14.5 s at 200
// (peak RSS 160 against 230 MiB; at 400, 12.1-13.7 s but 350-385 MiB), and
// rebuilt in 14.4-15.8 s against 11.8-14.5 s (peak 225-265 MiB; measured
// before BesideGC, whose cap within a rebuild is below what 200 allows of
// any live heap past 32 MiB, so that there only this one's end, which
// gives memory back, still does anything). The memory limit and the heap
// goal (KeepHeapGoal) hold either way.
func FoldingGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	gc.Lock()
	defer gc.Unlock()
	if gc.folds == 0 {
		gc.was = debug.SetGCPercent(200)
		if gc.keep {
			gc.was = gc.base // what was set is the goal's, not the base
		}
		gc.base = 200
		gc.set()
	}
	gc.folds++
	var once sync.Once
	return func() {
		once.Do(func() {
			gc.Lock()
			defer gc.Unlock()
			if gc.folds--; gc.folds == 0 {
				gc.base = gc.was
				debug.SetGCPercent(gc.was)
				gc.set()
				// The fold's garbage goes back to the system now, not at
				// the scavenger's pace: after a rebuild of a million
				// events a controller holding 10,000 nodes stayed
				// resident at 273-275 MiB for the minute after, against
				// issue 34's 200 MiB steady (docs/performance.md,
				// "Memory"). Off the caller's path: it collects first.
				// What Pebble freed goes back too (trimC).
				go func() { debug.FreeOSMemory(); trimC() }()
			}
		})
	}
}

// heapSlack is the garbage the collector lets grow between two cycles
// however large the live heap is, and live/4 the most beyond it. At Go's
// default (as much garbage as live heap) a controller holding 100,000
// nodes, a live heap of 300-470 MB, was resident at 1.1-1.4 GiB through a
// push, past issue 34's 700 MiB; a fixed low memory limit instead made the
// collector run without pause (docs/performance.md, "Memory"). Below
// heapSlack of live heap the collector runs as it did, but beside the live
// generation (BesideGC).
const heapSlack = 128 << 20

// smallSlack is the garbage a small live heap may grow, twice itself up to
// this much, where Go's default allows once itself. A controller holding
// 10,000 nodes has a live heap of 40-70 MB and allocates some 160 MB a
// push, so it collected three to four times a push (GODEBUG=gctrace=1);
// allowed twice itself, a push's collections halved and its CPU fell by
// some 7% (docs/performance.md, "Memory"; issue 34 point 1). It stops at
// 96 MiB, below any live heap of 100,000 nodes (200-290 MB through a push):
// there memory, not CPU, is the bound (700 MiB), and the rule must change
// nothing. A busy small controller's peaks grow by up to this much more
// garbage; a quiet one gives it back (idleRelease).
const smallSlack = 96 << 20

// besideSlack is heapSlack while a fold beside the live generation runs
// (BesideGC): then the most garbage allowed is this or live/8, whichever
// is more.
const besideSlack = 64 << 20

// GoalPercent is the collector's percent for a live heap of live bytes
// when base is what it would be otherwise: the garbage it allows is base
// percent of live, or twice live up to smallSlack when that is more, but
// at most heapSlack or live/4, whichever is more; with beside, a fold
// beside the live generation running, at most besideSlack or live/8.
//
// live/4, not live/2 as it was: a rebuild after two pushes at 100,000
// nodes (a live heap of 290-300 MB, a third of it the rebuild's) peaked at
// 645-669 MiB resident with live/2 and 626-632 with live/4, and the
// pushes at 608-632 against 603-614, for no CPU the box could tell
// (docs/performance.md, "The collector beside a rebuild"). Past 512 MiB
// live it allows a quarter of the live heap as garbage, so a larger
// fleet is not collected without pause.
func GoalPercent(base int, live uint64, beside bool) int {
	if base <= 0 || live == 0 {
		return base
	}
	garbage := max(live*uint64(base)/100, min(2*live, smallSlack))
	if beside {
		garbage = min(garbage, max(besideSlack, live/8))
	} else {
		garbage = min(garbage, max(heapSlack, live/4))
	}
	return max(int(garbage*100/live), 1)
}

// BesideGC lets the collector allow less garbage while a fold runs beside
// the live generation (a rebuild, verify), until the answer is called: such
// a fold holds a second set of read models and its traffic on top of the
// live heap, and its peak is the controller's. A rebuild after two pushes at
// 100,000 nodes peaked at 545-563 MiB resident with it and 626-669 without
// (issue 34's bound is 700), and at 10,000 nodes and a million events at
// 311-317 against 383-394 (bound 400; docs/performance.md, "The collector
// beside a rebuild"). The fold's CPU is what pays: the collector runs
// about twice as often through it, and a rebuild at 100,000 nodes took
// 10.9-16.6 s against 8.9-10.2. It holds only where a heap goal is kept
// (KeepHeapGoal), and not with GOGC given.
func BesideGC() (restore func()) {
	gc.Lock()
	defer gc.Unlock()
	gc.beside++
	gc.set()
	var once sync.Once
	return func() {
		once.Do(func() {
			gc.Lock()
			defer gc.Unlock()
			gc.beside--
			gc.set()
		})
	}
}

// KeepHeapGoal keeps the collector's percent at GoalPercent of the live
// heap after each cycle (read every 100 ms), until stop is called; with
// GOGC given it does nothing. mesh up and mesh serve run it.
func KeepHeapGoal() (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	unkeep := gc.keepGoal()
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	var cycles, allocsAtCycle uint64
	quiet := idleRelease{quietFor: quietFor}
	ahead := quietCollect{quietFor: collectQuietFor}
	stopWatch := Every(100*time.Millisecond, func() {
		metrics.Read(samples)
		allocs := samples[2].Value.Uint64()
		if c := samples[0].Value.Uint64(); c != cycles {
			cycles, allocsAtCycle = c, allocs
			gc.heard(samples[1].Value.Uint64())
		}
		live, goal := samples[1].Value.Uint64(), samples[3].Value.Uint64()
		if ahead.due(time.Now(), processCPU(), allocs, allocs-allocsAtCycle, goal-min(goal, live)) {
			runtime.GC() // its cycle is counted at the next look, as any
		}
		if quiet.due(time.Now(), cycles) {
			debug.FreeOSMemory()
			trimC()
			metrics.Read(samples)
			// Its collection is a cycle like any: what grew since is
			// counted from it.
			cycles, allocsAtCycle = samples[0].Value.Uint64(), samples[2].Value.Uint64()
			quiet.released(cycles)
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			stopWatch()
			unkeep()
		})
	}
}

// collectQuietFor is how long a process must have run no more than a
// trickle (quietCollect) before it collects ahead.
const collectQuietFor = 300 * time.Millisecond

// quietCollect says when to collect while the process is quiet, before an
// answer's own allocation would: a collection of a controller holding
// 100,000 nodes marks some 220 MB of live heap, 0.3-0.4 CPU s on two
// cores, and the first status after a change that met one took 0.36-0.47
// s end to end, against 0.20-0.26 for those that did not (GODEBUG=gctrace=1;
// issue 34's bound is 300 ms). Once the process has done an answer's work
// (a burst: a status, a push) and then been quiet for quietFor, and more
// than a quarter of the garbage the goal allows has built up since the
// last cycle, it collects: the next answer then starts with the whole
// room, where the collector starts its cycle some three quarters of the
// way (a change and its status made 30-45 MB at 100,000 nodes, of a room
// of 127). A cycle brought forward, once a burst, not one more: the
// garbage was made, and would be collected at the next allocation past
// the goal. And one more way, burst or none: once the room left would not
// hold what the last burst made, where a trickle fills the room quickly
// (due).
//
// Only a burst arms it, not a trickle: a look in which the process made
// more than a sixteenth of the goal's room (8 MB of 127 at 100,000 nodes,
// where a status makes 20-40 MB in a tenth of a second), and never less
// than minBurst. A controller hearing 100,000 nodes' beats spends a
// seventh of a core on them and makes about a megabyte a look, steadily;
// armed by any look above a tenth of a core (as it first was) it collected
// every three seconds, each time a quarter of the room had filled, four
// times as often as the collector would (docs/performance.md, "Liveness").
// A look's CPU does not tell an answer from a collector's own cycle, which
// uses as much and makes nothing. minBurst keeps a trickle from being a
// burst where the room is small (a heap near its memory limit, where the
// limit drives the collector already).
type quietCollect struct {
	quietFor time.Duration
	cpu      float64   // the process's CPU seconds at the last look
	allocs   uint64    // the bytes it had allocated at the last look
	busy     time.Time // when it was last seen doing more than a trickle
	armed    bool      // a burst was seen since the last collection ahead
	burst    uint64    // the bytes the allocation under way has made so far
	real     bool      // that allocation holds a burst (a look that arms)
	answer   uint64    // the bytes the last whole burst made
	grown    uint64    // grown at the last look: less now means a cycle ran
	cycle    time.Time // when a cycle was last seen to have run
}

// quietPerLook is the CPU between two looks (100 ms apart) a process may
// spend and still be quiet, a fifth of a core: a status of 100,000 nodes
// uses most of a core for a tenth of a second, their beats a seventh of
// one all the time. A look must allocate more than minBurst to arm it.
const (
	quietPerLook = 0.02
	minBurst     = 8 << 20
)

// due reports whether to collect now: cpu is the process's CPU seconds so far,
// allocs the bytes it allocated so far, grown those since the last cycle,
// room the goal's room above the live heap.
func (q *quietCollect) due(now time.Time, cpu float64, allocs, grown, room uint64) bool {
	used, made := cpu-q.cpu, allocs-min(allocs, q.allocs)
	q.cpu, q.allocs = cpu, allocs
	if q.busy.IsZero() {
		q.busy = now
		return false
	}
	// Less grown than at the last look: a cycle ran since (the rate a
	// trickle fills the room at is reckoned from it, below).
	if grown < q.grown || q.cycle.IsZero() {
		q.cycle = now
	}
	q.grown = grown
	// What an answer makes is counted from the first look that made more
	// than a trickle to the first that made no more, the looks on either
	// side of its burst included (an answer begun late in a look, or
	// ending early in one): a burst's looks alone left the room kept for
	// it short by up to two sixteenths.
	making := made > max(room/32, minBurst/2)
	if made > max(room/16, minBurst) {
		q.armed, q.real = true, true
	}
	if making {
		q.burst += made
	} else {
		if q.real {
			q.answer = q.burst
		}
		q.burst, q.real = 0, false
	}
	// A look that arms it is busy however little CPU it shows, and so
	// is one that made clearly more than a trickle: an answer that
	// began late in the look has made its first megabytes and used a
	// few milliseconds. Counted quiet, the collection could be due at
	// that very look and ran beside the answer it was meant to come
	// before: the statuses over 300 ms at 100,000 nodes were those,
	// their collections 176-397 ms of wall against 95-145 for the rest
	// (docs/performance.md, "A fleet beating while the operator asks").
	if used > quietPerLook || making {
		q.busy = now
		return false
	}
	if now.Sub(q.busy) < q.quietFor {
		return false
	}
	if q.armed && grown > room/4 {
		q.armed = false
		return true
	}
	// Unarmed, a trickle still fills the room: a fleet's beats filled it
	// in 6-13 s at 100,000 nodes, and a status asked once it was mostly
	// full met the collector there (its first after two pushes: 0.34 s,
	// the controller 0.36-0.40 CPU s against 0.14-0.17 for the rest, its
	// cycle's idle workers taking the core the status's decoding had).
	// So once what is left of the room would not hold what the last
	// burst made, it collects now, while quiet. At most half the room is
	// kept clear, so a trickle alone is collected at most twice as often
	// as the collector would (after two pushes at 100,000 nodes, whose
	// burst is larger than the room, every 5.2-5.3 s at rest against 6-7).
	//
	// Not where the room is small (near a memory limit, which drives the
	// collector there already: a room of nothing would be collected at
	// every quiet look), and only where the trickle would have the
	// collector cycle within an idle release's spell anyway (the room
	// over the rate it fills at): where it fills more slowly, collecting
	// would keep the release (idleRelease) from ever coming, each
	// collection ahead a cycle that starts its spell again, and memory
	// would stay resident (a review: a room filled in 45 s was collected
	// ahead 13 times in five minutes and never released).
	fills := float64(room) * now.Sub(q.cycle).Seconds() / float64(max(grown, 1)) // seconds to fill the room
	if q.answer > 0 && room >= 2*minBurst && grown > room-min(q.answer, room/2) && fills < quietFor.Seconds() {
		return true
	}
	return false
}

// processCPU is the CPU seconds this process has used, user and system, as
// the operating system counts them: the runtime's metrics estimate the
// time of Go code alone, and a process busy in a system call (the fold's
// writes, the bus's sockets) is not quiet. bench.Self reads the same, with
// its memory from /proc, which a look every 100 ms has no use for.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// quietFor is how long a controller goes without a collection before the
// heap's free pages go back to the system at once (idleRelease).
const quietFor = 30 * time.Second

// idleRelease says when a process that was busy has gone quiet: no
// collection for quietFor since the last one it counted. Then the heap's
// free pages go back to the system at once (debug.FreeOSMemory), once a
// quiet spell. The scavenger returns them only down to the heap's goal,
// and slowly: a controller holding 10,000 nodes after a million events of
// traffic stayed resident at 205-222 MiB through the two minutes after,
// against issue 34's 200 MiB steady, where the same controller after a
// rebuild (whose end releases them) held 149. A quiet spell of half a
// minute is not one between a fleet's pushes and reports (mesh bench
// rests 10 s), so a busy controller does not collect for it.
type idleRelease struct {
	quietFor time.Duration
	cycles   uint64    // the collections counted when last asked
	moved    time.Time // when that count last moved
	done     bool      // released since it last moved
}

// due reports whether to release now, with cycles collections counted.
func (r *idleRelease) due(now time.Time, cycles uint64) bool {
	if cycles != r.cycles || r.moved.IsZero() {
		r.cycles, r.moved, r.done = cycles, now, false
		return false
	}
	return !r.done && now.Sub(r.moved) >= r.quietFor
}

// released records a release, whose own collection left cycles counted:
// that one is not the process being busy again.
func (r *idleRelease) released(cycles uint64) { r.cycles, r.done = cycles, true }

// Every calls step every period on a goroutine of its own until stop is
// called; stop returns once step no longer runs.
func Every(period time.Duration, step func()) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				step()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// collector is the collector's setting: the long folds running and what
// it was before the first (was), the percent it would have without a heap
// goal (base), and the live heap after the last cycle while a goal is kept.
type collector struct {
	sync.Mutex
	folds     int
	beside    int // folds beside the live generation running (BesideGC)
	was, base int
	keep      bool
	live      uint64
}

var gc collector

// set applies the heap goal to base, when one is kept; the caller holds
// the lock and has set base already when no goal is kept.
func (c *collector) set() {
	if c.keep {
		debug.SetGCPercent(GoalPercent(c.base, c.live, c.beside > 0))
	}
}

// keepGoal begins keeping the heap goal, from the percent set now, and
// answers what ends it, putting that percent back.
func (c *collector) keepGoal() (unkeep func()) {
	c.Lock()
	defer c.Unlock()
	c.keep = true
	c.base = debug.SetGCPercent(100)
	debug.SetGCPercent(c.base)
	return func() {
		c.Lock()
		defer c.Unlock()
		c.keep = false
		debug.SetGCPercent(c.base)
	}
}

// heard sets the goal from the live heap after a cycle.
func (c *collector) heard(live uint64) {
	c.Lock()
	defer c.Unlock()
	c.live = live
	c.set()
}
