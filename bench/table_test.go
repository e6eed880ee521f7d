package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A table of known figures: each row is the median push per node against
// its floor, and the exit rule holds each ratio to its bound.
func TestTheTableDividesByNodesAndHoldsEachRowToItsBound(t *testing.T) {
	t.Parallel()
	s := time.Second
	tb := Table{
		// A report's verification, 5 µs, is priced in the real agents' row
		// alone.
		Floor: Costs{Sign: 20 * time.Microsecond, Publish: 25 * time.Microsecond, Read: 10 * time.Microsecond, Verify: 5 * time.Microsecond},
		Ops:   1000, Rounds: 3,
		Simulated: Phase{Name: "simulated", Sent: []int{10_000, 10_000, 10_000},
			// 0.55 s over 10,000 nodes is 55 µs: 1.375 times 40 µs.
			Controller: Process{Name: "controller", Pushes: []time.Duration{s * 6 / 10, s * 55 / 100, s * 7 / 10}},
			// 0.7 s: 70 µs, 1.4 times two publishes.
			Bus:   Process{Name: "bus", Pushes: []time.Duration{s * 7 / 10, s * 7 / 10, s * 7 / 10}},
			Fleet: Process{Name: "fleet", Pushes: []time.Duration{s, s, s}}},
		Real: Phase{Name: "real agents", Sent: []int{5_000},
			// (0.3 + 0.4) s over 5,000: 140 µs, against 60 + 70 simulated.
			Controller: Process{Name: "controller", Pushes: []time.Duration{s * 3 / 10}},
			Bus:        Process{Name: "bus", Pushes: []time.Duration{s * 4 / 10}},
			Fleet:      Process{Name: "fleet", Pushes: []time.Duration{s}}},
		// The bus spent 100 µs an agent on sockets of their own, 40 on
		// one shared, and the hub 30 and 20: a socket's price is 70 µs.
		Sockets: Sockets{Own: 100 * time.Microsecond, Burst: 70 * time.Microsecond, Shared: 40 * time.Microsecond, Span: s,
			HubOwn: 30 * time.Microsecond, HubBurst: 25 * time.Microsecond, HubShared: 20 * time.Microsecond},
		Bounds: Issue34,
	}
	rows := tb.Rows()
	want := []struct {
		key          string
		median, flor time.Duration
		over         bool
	}{
		{"controller", 60 * time.Microsecond, 40 * time.Microsecond, false},
		{"bus", 70 * time.Microsecond, 50 * time.Microsecond, true},
		{"nodes", 100 * time.Microsecond, 30 * time.Microsecond, false}, // no bound
		{"real", 140 * time.Microsecond, 130 * time.Microsecond, false}, // no bound
		{"sockets", 140 * time.Microsecond, 205 * time.Microsecond, false},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.Key != w.key || r.Median() != w.median || r.Floor != w.flor || r.Over() != w.over {
			t.Errorf("row %s: median %s against %s, over %v; want %s: %s against %s, over %v", r.Key, r.Median(), r.Floor, r.Over(), w.key, w.median, w.flor, w.over)
		}
	}
	over, said := tb.Over()
	if len(over) != 1 || !strings.Contains(said, "1 of 5 row(s) over their bound: bus (nats-server) at 1.40x (bound 1.3x, over by 8%)") {
		t.Fatalf("over: %d rows, %q", len(over), said)
	}
	// A bound nobody could meet fails every row it is given to.
	tb.Bounds = Bounds{Controller: 0.01, Bus: 100, Nodes: 0.01, Real: 1, Sockets: 100}
	if over, said := tb.Over(); len(over) != 3 || !strings.Contains(said, "controller at 1.50x") || !strings.Contains(said, "simulated nodes at 3.33x") ||
		!strings.Contains(said, "controller + bus, real agents at 1.08x") {
		t.Fatalf("impossible bounds: %d rows over, %q", len(over), said)
	}
	// A row just over its bound says by how much in tenths, never "0%".
	tb.Bounds = Bounds{Real: 1.075}
	if _, said := tb.Over(); !strings.Contains(said, "(bound 1.075x, over by 0.2%)") {
		t.Fatalf("real agents at 1.077x against 1.075: %q", said)
	}
	// Against simulated nodes, a socket's price and a verify: 140 µs is
	// within 1.05 times 130, 70 and 5; with no socket's price, within
	// 1.05 times 130 and 5 (1.04x), and over it with no verify either
	// (1.08 times 130).
	tb.Bounds = Issue34
	tb.Bounds.Sockets = 1.05
	if over, said := tb.Over(); len(over) != 1 || strings.Contains(said, "priced in") {
		t.Fatalf("real agents at 140 µs against 205: %d rows over, %q", len(over), said)
	}
	tb.Sockets.Own, tb.Sockets.HubOwn = tb.Sockets.Shared, tb.Sockets.HubShared
	if over, said := tb.Over(); len(over) != 1 || strings.Contains(said, "priced in") {
		t.Fatalf("real agents at 140 µs against 135 with no socket's price: %d rows over, %q", len(over), said)
	}
	tb.Floor.Verify = 0
	if over, said := tb.Over(); len(over) != 2 || !strings.Contains(said, "the same, sockets and signatures priced in at 1.08x") {
		t.Fatalf("real agents at 140 µs against 130 with no price: %d rows over, %q", len(over), said)
	}
	tb.Floor.Verify = 5 * time.Microsecond
	tb.Sockets.Own, tb.Sockets.HubOwn = 100*time.Microsecond, 30*time.Microsecond
	// A push too small for the system to count is no figure: with a
	// bound, it fails the run rather than passing it at 0x.
	tb.Bounds = Issue34
	tb.Real.Controller.Pushes, tb.Real.Bus.Pushes = []time.Duration{0}, []time.Duration{0}
	if over, said := tb.Over(); len(over) != 2 || !strings.Contains(said, "1 row(s) with no figure") || !strings.Contains(said, "(the same, sockets and signatures priced in): give more --nodes or --agents") {
		t.Fatalf("an unmeasured row: %d rows fail, %q", len(over), said)
	}
	var out bytes.Buffer
	tb.Print(&out)
	for _, line := range []string{"ed25519 sign of 1200 bytes", "controller + bus, real agents", "OVER by", "NO FIGURE", "real agents, 5000 node(s)",
		"answering within 1.0 s (the real agents' span)", "a socket's price, bus and hub (their own within the span, less shared): 70.0 µs", "205.0 µs (simulated, a socket's price, a verify)", "ed25519 verify of 420 bytes (a report's, for real agents)  5.0 µs"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the table does not say %q:\n%s", line, out.String())
		}
	}
}

// Without real agents the table has no row for them, rather than a ratio
// against nothing.
func TestATableWithoutRealAgentsHasNoRowForThem(t *testing.T) {
	t.Parallel()
	tb := Table{Floor: Costs{Sign: 1, Publish: 1, Read: 1}, Bounds: Issue34,
		Simulated: Phase{Sent: []int{1}, Controller: Process{Pushes: []time.Duration{1}}, Bus: Process{Pushes: []time.Duration{1}}, Fleet: Process{Pushes: []time.Duration{1}}}}
	for _, r := range tb.Rows() {
		if r.Key == "real" {
			t.Fatal("a run without real agents has a row for them")
		}
	}
}

// A floor's figure and a row's are one statistic, the median: a floor kept
// as its least round held a median push against the luckiest of three.
func TestTheMedianIsTheMiddleRoundNotTheLeast(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{30, 10, 20}, 20},
		{[]time.Duration{40, 10, 30, 20}, 20},
		{[]time.Duration{7}, 7},
		{nil, 0},
	} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Warm-up pushes are in no figure: the rows hold the measured pushes
// alone, whatever the warm-ups cost, and the first push is said in a row
// of its own against the controller's floor, held to no bound, so that
// what the warm-ups leave out is printed beside what they leave in.
func TestWarmUpPushesAreInNoFigureButTheFirstPushsRow(t *testing.T) {
	t.Parallel()
	s := time.Second
	tb := Table{Floor: Costs{Sign: 20 * time.Microsecond, Publish: 25 * time.Microsecond, Read: 10 * time.Microsecond, Faults: 4200}, Bounds: Issue34,
		Simulated: Phase{Name: "simulated", Sent: []int{10_000, 10_000, 10_000},
			Controller: Process{Name: "controller", Pushes: []time.Duration{s * 6 / 10, s * 55 / 100, s * 7 / 10}, Faults: []int64{3000, 2000, 9000},
				Warmup: []time.Duration{5 * s, 4 * s}, WarmupFaults: []int64{25_000, 1}},
			Bus:   Process{Name: "bus", Pushes: []time.Duration{s * 6 / 10, s * 6 / 10, s * 6 / 10}, Warmup: []time.Duration{9 * s, 9 * s}, WarmupFaults: []int64{0, 0}},
			Fleet: Process{Name: "fleet", Pushes: []time.Duration{s, s, s}, Warmup: []time.Duration{s, s}, WarmupFaults: []int64{0, 0}}}}
	byKey := map[string]Row{}
	for _, r := range tb.Rows() {
		byKey[r.Key] = r
	}
	// 0.6 s of the median measured push over 10,000 nodes: 60 µs, the
	// warm-ups' 4-5 s nowhere in it.
	if c := byKey["controller"]; c.Median() != 60*time.Microsecond || c.Over() {
		t.Errorf("the controller's row reads %s (over %v), want 60 µs within: the warm-ups were counted", c.Median(), c.Over())
	}
	if b := byKey["bus"]; b.Median() != 60*time.Microsecond {
		t.Errorf("the bus's row reads %s, want 60 µs: the warm-ups were counted", b.Median())
	}
	// The first push: 5 s over 10,000 nodes, 500 µs against 40, no bound.
	first, ok := byKey["first"]
	if !ok || first.Median() != 500*time.Microsecond || first.Floor != 40*time.Microsecond || first.Bound != 0 || first.Over() {
		t.Fatalf("the first push's row: %+v (present %v), want 500 µs against 40, unbounded", first, ok)
	}
	if over, said := tb.Over(); len(over) != 0 {
		t.Errorf("a first push twelve times its floor failed the run: %q", said)
	}
	var out bytes.Buffer
	tb.Print(&out)
	for _, line := range []string{"after 2 warm-up push(es) to each fleet, in no figure but the first push's row", "controller, its first push (a warm-up)",
		"a round of all four faulted in 4200 pages", "3000 pages", "warm-up: 5.00 s, 25.0k pages; 4.00 s, 1 page"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the table does not say %q:\n%s", line, out.String())
		}
	}
	// With no warm-up there is no first push's row, and the table says so.
	tb.Simulated.Controller.Warmup = nil
	for _, r := range tb.Rows() {
		if r.Key == "first" {
			t.Error("a run with no warm-up has a first push's row apart")
		}
	}
	out.Reset()
	tb.Print(&out)
	if !strings.Contains(out.String(), "no warm-up push before them") || !strings.Contains(out.String(), "no warm-up push\n") {
		t.Errorf("a run with no warm-up does not say so:\n%s", out.String())
	}
}

// With a floor round before each push and one after the last, each push
// is held against the mean of the rounds around it, and the row's ratio
// is the median of those. Every round differs, so a push held against
// another's rounds (or the one before or after alone) reads otherwise; the
// last push is twice its floor, so a mean of the pushes' ratios reads
// otherwise too; and a box fast for the first pushes and slow for the last
// reads each push at 1.2x where its medians read 1.98x. Fails when any of
// those is the rule.
func TestEachPushIsHeldAgainstTheFloorAroundIt(t *testing.T) {
	t.Parallel()
	us := time.Microsecond
	// The floor's publish, round by round: fast, then slow.
	publish := []time.Duration{10 * us, 12 * us, 11 * us, 13 * us, 30 * us, 34 * us, 31 * us, 35 * us}
	floors := make([]Costs, len(publish))
	for i, p := range publish {
		floors[i] = Costs{Sign: 2 * p, Publish: p, Read: p / 2}
	}
	// The bus 1.2 times two publishes around each push, the last twice.
	bus := make([]time.Duration, len(publish)-1)
	for i := range bus {
		bus[i] = (publish[i] + publish[i+1]) * 12 / 10
	}
	bus[len(bus)-1] = (publish[len(bus)-1] + publish[len(bus)]) * 2
	sent := make([]int, len(bus))
	for i := range sent {
		sent[i] = 1
	}
	tb := Table{Floor: MedianCosts(floors), Floors: floors, Bounds: Issue34,
		Simulated: Phase{Sent: sent, Controller: Process{Pushes: bus}, Bus: Process{Pushes: bus}, Fleet: Process{Pushes: bus}}}
	b := tb.Rows()[1]
	if b.Key != "bus" || b.Median() != 51600*time.Nanosecond || b.Floor != 26*us {
		t.Fatalf("the bus row: %s, median %s against %s; want the median push 51.6 µs against the rounds' median, 26 µs", b.Key, b.Median(), b.Floor)
	}
	if got := b.Ratio(); got < 1.1999 || got > 1.2001 || b.Over() {
		t.Fatalf("the bus read %.4fx (over %v), want each push's 1.2x, within", got, b.Over())
	}
	if got := b.MediansRatio(); got < 1.98 || got > 1.99 {
		t.Fatalf("the medians read %.3fx, want 51.6/26", got)
	}
	// Without a round after the last push there is nothing around it:
	// the medians again.
	tb.Floors = floors[:len(bus)]
	if got := tb.Rows()[1].Ratio(); got != tb.Rows()[1].MediansRatio() {
		t.Fatalf("with no round after the last push the bus read %.3fx, want the medians' %.3fx", got, tb.Rows()[1].MediansRatio())
	}
	// Of an even many pushes, the mean of the middle two: six pushes at
	// 1.0, 1.1, 1.2, 1.3, 1.4 and 1.5 times their floor read 1.25x.
	tb.Floors = floors[:7]
	six := make([]time.Duration, 6)
	for i := range six {
		six[i] = (publish[i] + publish[i+1]) * time.Duration(10+i) / 10
	}
	tb.Simulated = Phase{Sent: sent[:6], Controller: Process{Pushes: six}, Bus: Process{Pushes: six}, Fleet: Process{Pushes: six}}
	if got := tb.Rows()[1].Ratio(); got < 1.2499 || got > 1.2501 {
		t.Fatalf("six pushes at 1.0-1.5x read %.4fx, want the middle two's mean, 1.25x", got)
	}
	var out bytes.Buffer
	tb.Print(&out)
	for _, want := range []string{"the median of each push against the mean of the floor's rounds just before and just after it",
		"the column mesh over the column against: controller", fmt.Sprintf("bus %.2fx (each push against its rounds 1.00-1.50x)", tb.Rows()[1].MediansRatio())} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table does not say %q:\n%s", want, out.String())
		}
	}
}

// The floor's figure of each operation is its median round, each
// operation's apart: a verify dropped from the medians would hold real
// agents to no signature check at all.
func TestTheFloorKeepsEachOperationsMedianRound(t *testing.T) {
	t.Parallel()
	us := time.Microsecond
	rounds := []Costs{
		{Sign: 30 * us, Publish: 20 * us, Read: 9 * us, Verify: 70 * us, Faults: 5},
		{Sign: 10 * us, Publish: 40 * us, Read: 7 * us, Verify: 50 * us, Faults: 3},
		{Sign: 20 * us, Publish: 30 * us, Read: 8 * us, Verify: 60 * us, Faults: 4},
	}
	want := Costs{Sign: 20 * us, Publish: 30 * us, Read: 8 * us, Verify: 60 * us, Faults: 4}
	if got := MedianCosts(rounds); got != want {
		t.Fatalf("the floor's medians: %+v, want %+v", got, want)
	}
}
