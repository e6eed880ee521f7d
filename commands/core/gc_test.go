package core

import (
	"runtime/debug"
	"testing"
	"time"
)

// A long fold lets the collector run half as often and puts it back after
// the last of those running ends, and leaves it alone when GOGC was given.
func TestFoldingGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)

	t.Setenv("GOGC", "")
	first, second := FoldingGC(), FoldingGC()
	if during := debug.SetGCPercent(200); during != 200 {
		t.Fatalf("during two folds the collector's percent is %d, want 200", during)
	}
	first()
	first() // twice is once
	if during := debug.SetGCPercent(200); during != 200 {
		t.Fatalf("with one fold still running the collector's percent is %d, want 200", during)
	}
	second()
	if after := debug.SetGCPercent(100); after != 100 {
		t.Fatalf("after the folds the collector's percent is %d, want 100 as before", after)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	restore := FoldingGC()
	if during := debug.SetGCPercent(50); during != 50 {
		t.Fatalf("with GOGC=50 the catch-up set the collector's percent to %d", during)
	}
	restore()
}

// The heap goal lets as much garbage grow as the collector's percent says,
// or twice a small live heap up to 96 MiB (a push at 10,000 nodes
// collected half as often), but at most 128 MiB or a quarter of the live
// heap: a controller holding 100,000 nodes was resident at twice its live
// heap and more (issue 34's 700 MiB). Beside a second generation (a
// rebuild, verify) at most 64 MiB or an eighth.
func TestGoalPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base   int
		live   uint64
		beside bool
		want   int
		why    string
	}{
		{100, 20 * mib, false, 200, "a small heap grows twice itself in garbage"},
		{100, 60 * mib, false, 160, "up to 96 MiB"},
		{200, 60 * mib, false, 200, "and as much as a long fold's percent says, when more"},
		{100, 96 * mib, false, 100, "a heap of 96 MiB collects as Go's default does"},
		{100, 128 * mib, false, 100, "up to 128 MiB of garbage"},
		{100, 200 * mib, false, 64, "past it, 128 MiB"},
		{100, 400 * mib, false, 32, "128 MiB still at 400 MiB live, not half of it"},
		{100, 1024 * mib, false, 25, "a quarter of the live heap, when more"},
		{200, 1024 * mib, false, 25, "for a long fold too"},
		{100, 20 * mib, true, 200, "beside, a small heap still grows twice itself"},
		{200, 60 * mib, true, 106, "beside, a long fold's garbage is at most 64 MiB"},
		{100, 300 * mib, true, 21, "beside, 64 MiB at 300 MiB live"},
		{100, 1024 * mib, true, 12, "beside, an eighth of the live heap, when more"},
		{100, 0, false, 100, "before the first cycle"},
		{-1, 400 * mib, true, -1, "off stays off"},
	} {
		if got := GoalPercent(c.base, c.live, c.beside); got != c.want {
			t.Errorf("GoalPercent(%d, %d MiB, %v) = %d, want %d: %s", c.base, c.live/mib, c.beside, got, c.want, c.why)
		}
	}
}

// A kept heap goal sets the collector's percent from the live heap, a long
// fold within it still raises the base, and stopping it puts back the base.
func TestKeepHeapGoal(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	t.Setenv("GOGC", "")
	// The goal without its watcher, which would set the live heap this
	// test's process has.
	stop := gc.keepGoal()
	defer stop()
	gc.heard(400 << 20)
	if p := debug.SetGCPercent(32); p != 32 {
		t.Fatalf("with 400 MiB live the collector's percent is %d, want 32", p)
	}
	restore := FoldingGC()
	if p := debug.SetGCPercent(32); p != 32 {
		t.Fatalf("a long fold with 400 MiB live set the percent to %d, want 32", p)
	}
	gc.heard(60 << 20)
	if p := debug.SetGCPercent(200); p != 200 {
		t.Fatalf("a long fold with 60 MiB live set the percent to %d, want 200", p)
	}
	restore()
	if p := debug.SetGCPercent(100); p != 160 {
		t.Fatalf("after the fold with 60 MiB live the percent is %d, want 160 (96 MiB of garbage)", p)
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("after the goal stopped the percent is %d, want the base, 100", p)
	}
}

// A fold beside the live generation allows less garbage while it runs,
// within a long fold too, and puts back what was once the last of them
// ends, in whichever order the long fold and it end; it does nothing where
// no heap goal is kept, and a goal stopped while it runs puts back the base.
func TestBesideGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })
	t.Setenv("GOGC", "")
	hold := func() func() {
		restore := BesideGC()
		t.Cleanup(restore) // a failure below must not leave it held for the next test
		return restore
	}
	beside := hold()
	percentIs(t, 100, "with no heap goal kept, a fold beside")
	beside()

	stop := gc.keepGoal()
	t.Cleanup(stop)
	gc.heard(300 << 20)
	percentIs(t, 42, "with 300 MiB live (128 MiB of garbage)")
	restore := FoldingGC()
	t.Cleanup(restore)
	first, second := hold(), hold()
	percentIs(t, 21, "beside the live generation with 300 MiB live (64 MiB)")
	first()
	first() // twice is once
	percentIs(t, 21, "with one fold beside still running")
	restore() // the long fold ends first
	percentIs(t, 21, "with the long fold ended and one beside still running")
	second()
	percentIs(t, 42, "after the folds beside")

	third := hold()
	stop()
	percentIs(t, 100, "the goal stopped while a fold beside ran")
	third()
	percentIs(t, 100, "a fold beside that ended after the goal stopped")
}

// percentIs fails t unless the collector's percent is want (which it
// then stays): what says when it is looked at.
func percentIs(t *testing.T, want int, what string) {
	t.Helper()
	if p := debug.SetGCPercent(want); p != want {
		t.Fatalf("%s: the collector's percent is %d, want %d", what, p, want)
	}
}

// A process quiet for the spell after a collection releases its free
// pages once, not again until it collects again and goes quiet anew; its
// own release's collection is not it being busy.
func TestIdleReleaseOnceAQuietSpell(t *testing.T) {
	r := idleRelease{quietFor: 30 * time.Second}
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if r.due(at(0), 7) {
		t.Fatal("released at the first look, before any quiet spell")
	}
	if r.due(at(29*time.Second), 7) {
		t.Fatal("released before the process was quiet for the spell")
	}
	if r.due(at(20*time.Second), 8) || r.due(at(49*time.Second), 8) {
		t.Fatal("a collection did not start the quiet spell over")
	}
	if !r.due(at(50*time.Second), 8) {
		t.Fatal("not released after a whole quiet spell")
	}
	r.released(9) // its own collection
	if r.due(at(90*time.Second), 9) || r.due(at(10*time.Minute), 9) {
		t.Fatal("released twice in one quiet spell")
	}
	if r.due(at(11*time.Minute), 10) {
		t.Fatal("released at once when busy again")
	}
	if !r.due(at(11*time.Minute+30*time.Second), 10) {
		t.Fatal("not released after the next quiet spell")
	}
}

// A process collects ahead once it has done an answer's work (a burst of
// allocation) and been quiet for the spell since, with more than a quarter
// of the goal's room used, once a burst (and, burst or none, once the room
// left would not hold what the last answer made); not for a trickle (nor where the
// room is small), not while busy, not before the spell, not with a quarter
// or less of the room used, not armed by a cycle's CPU, not at a burst's
// first look however little CPU it shows. Fails on a collection out of
// turn or one missed.
func TestQuietCollectAheadOnceAQuietSpell(t *testing.T) {
	q := quietCollect{quietFor: 300 * time.Millisecond}
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const room = 128 << 20
	const trickle, burst = room / 16, room/16 + 1 // a trickle up to the bound
	// beats are what a fleet's beats make a look (a megabyte or so): a
	// look that makes more than twice that is not quiet.
	const beats = room / 128
	cpu, allocs := 1.0, uint64(1<<30)
	look := func(ms int, used float64, made, grown uint64) bool {
		cpu, allocs = cpu+used, allocs+made
		return q.due(at(ms), cpu, allocs, grown, room)
	}
	if look(0, 0, burst, room) {
		t.Fatal("collected at the first look")
	}
	// A trickle (a fleet's beats: a seventh of a core, a megabyte a look)
	// never arms it, however much garbage it builds up; nor does a
	// collector's cycle, busy and making nothing.
	for ms := 100; ms <= 3000; ms += 100 {
		used := 0.015
		if ms == 1000 || ms == 1100 {
			used = 0.15
		}
		if look(ms, used, trickle, room) {
			t.Fatalf("collected for a trickle at %d ms", ms)
		}
	}
	if look(3100, 0.05, burst, room) || look(3200, 0.03, trickle, room) {
		t.Fatal("collected while busy")
	}
	if look(3300, 0, 0, room) || look(3400, 0.015, beats, room) {
		t.Fatal("collected before a whole quiet spell")
	}
	if look(3500, 0, 0, room/4) {
		t.Fatal("collected with a quarter of the room used")
	}
	if !look(3600, 0.015, beats, room/4+1) {
		t.Fatal("not collected after a burst and a quiet spell, with more than a quarter of the room used")
	}
	// What a trickle builds up after the collection, well short of the
	// room's top, is the collector's own to collect.
	const after = room / 2
	if look(3700, 0.3, 0, after) || look(8000, 0.01, beats, after) {
		t.Fatal("collected twice after one burst")
	}
	if look(8100, 0.2, burst, room) || look(8200, 0, 0, room) {
		t.Fatal("collected at once when busy again")
	}
	if !look(8400, 0, 0, room) {
		t.Fatal("not collected after the next burst's quiet spell")
	}
	// A burst that began late in a look, long after the last: its
	// first megabytes made, a few milliseconds of CPU. That look is the
	// answer's start, not a quiet spell's end.
	if look(12000, 0.015, beats, after) || look(12100, 0.005, burst, room) {
		t.Fatal("collected at the first look of a burst, beside the answer it should come before")
	}
	if look(12200, 0.2, burst, room) || look(12300, 0.015, beats, room) || look(12400, 0.015, beats, room) {
		t.Fatal("collected before the burst's quiet spell")
	}
	if !look(12500, 0.015, beats, room) {
		t.Fatal("not collected after a burst that began late in a look and its quiet spell")
	}
	// Armed and waiting for the quarter, an answer begun late in a look
	// makes less than a burst by its end, enough to fill the quarter:
	// that look is busy too, and the collection comes after the answer.
	if look(12600, 0.3, burst, room/8) || look(13000, 0.015, beats, room/8) {
		t.Fatal("collected with a quarter or less of the room used")
	}
	if look(13100, 0.005, trickle, room) {
		t.Fatal("collected at a look that made less than a burst and far more than beats, beside the answer it should come before")
	}
	if look(13200, 0.2, trickle, room) || look(13400, 0.015, beats, room) {
		t.Fatal("collected before the answer's quiet spell")
	}
	if !look(13500, 0.015, beats, room) {
		t.Fatal("not collected after the answer's quiet spell")
	}
	// Unarmed, a trickle fills the room: once what is left would not
	// hold what the last burst made (burst, at 12600), it collects,
	// quiet; not before, and once.
	if look(20000, 0.015, beats, room-burst) {
		t.Fatal("collected with room left for what the last burst made")
	}
	if !look(20100, 0.015, beats, room-burst+1) {
		t.Fatal("not collected once the room left would not hold what the last burst made")
	}
	if look(20200, 0.015, beats, beats) {
		t.Fatal("collected again right after")
	}
	// An answer over two looks, and a look either side that made more
	// than a trickle but less than a burst: the room kept clear is all
	// four looks' (trickle*2 + burst*2), not one look's.
	if look(21000, 0.2, trickle, room/8) || look(21100, 0.3, burst, room/8) || look(21200, 0.3, burst, room/8) ||
		look(21300, 0.2, trickle, room/8) || look(21400, 0.015, beats, room/8) {
		t.Fatal("collected while busy")
	}
	if !look(21700, 0.015, beats, room/4+1) { // armed by the answer
		t.Fatal("not collected after the answer and a quiet spell")
	}
	const answer = 2*trickle + 2*burst
	if look(22000, 0.015, beats, room-answer) {
		t.Fatal("collected with room left for what the last answer made")
	}
	if !look(22100, 0.015, beats, room-answer+1) {
		t.Fatal("not collected once the room left would not hold the last answer's four looks")
	}
	// A trickle that fills the room more slowly than an idle release's
	// spell is left to the collector: collecting would keep the release
	// from ever coming.
	if look(22200, 0.015, beats, beats) || look(57200, 0.015, beats, room-1) { // the room filled in 35 s
		t.Fatal("collected ahead of a trickle slower than an idle release's spell")
	}
	// A push's burst makes more than the room: half the room is kept
	// clear, no more, so a trickle alone never collects more than twice
	// as often as the collector would.
	if look(60000, 0.9, room, beats) || look(60100, 0.015, beats, room/8) {
		t.Fatal("collected while busy")
	}
	if !look(60400, 0.015, beats, room/4+1) {
		t.Fatal("not collected after a push's burst and a quiet spell")
	}
	if look(70000, 0.015, beats, room/2) {
		t.Fatal("collected with half the room left, after a burst larger than the room")
	}
	if !look(70100, 0.015, beats, room/2+1) {
		t.Fatal("not collected with less than half the room left, after a burst larger than the room")
	}
	// A trickle that would fill the room in 40 s, less than its half 20 s
	// after the last cycle: the collector would not cycle within an idle
	// release's spell, so a collection ahead would keep the release from
	// coming. Left to the collector.
	if look(80000, 0.015, beats, beats) || look(100000, 0.015, beats, room/2+1) {
		t.Fatal("collected ahead of a trickle slower than an idle release's spell")
	}
	// One that fills it in 25 s, within the spell: collected ahead.
	if !look(105000, 0.015, beats, room-1) {
		t.Fatal("not collected ahead of a trickle that fills the room within an idle release's spell")
	}
	// Near a memory limit the room is small: a trickle of a megabyte a
	// look is more than a sixteenth of 12 MB, and still not a burst; nor
	// is a look of 8 MB.
	small := quietCollect{quietFor: 300 * time.Millisecond, answer: 4 << 20}
	for ms := 0; ms <= 3000; ms += 100 {
		allocs += 1 << 20
		if ms == 1000 {
			allocs += minBurst - 1<<20
		}
		if small.due(at(ms), cpu, allocs, 12<<20, 12<<20) {
			t.Fatalf("collected for a trickle in a small room at %d ms", ms)
		}
	}
}
