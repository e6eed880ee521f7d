package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Process is one process of a phase as the operating system counted it.
type Process struct {
	Name string
	// Pushes is the CPU time of each push above what the process spends
	// at rest over as long (agents' beats and periodic reads are not a
	// push's).
	Pushes []time.Duration
	// Faults is the pages each push faulted in (Usage.Faults), and Warmup
	// the CPU above idle of each warm-up push, made before the measured
	// ones and in no bounded row (WarmupFaults their pages faulted in).
	Faults       []int64
	Warmup       []time.Duration
	WarmupFaults []int64
	// Idle is its CPU seconds per second at rest, measured before each
	// push (the median).
	Idle float64
	// RSS and Peak are its resident memory after the pushes, and at its
	// highest.
	RSS, Peak int64
}

// Phase is one fleet pushed several times: the simulated one (mesh fleet
// --simulate on an open bus) or the real agents (mesh fleet on a closed
// one), each with a bus and a controller of its own.
type Phase struct {
	Name string
	// Sent is how many nodes each push sent, and Spans how long each
	// push's reports took from the first to the last.
	Sent                   []int
	Spans                  []time.Duration
	Controller, Bus, Fleet Process
}

// Bounds are each row's bound on its ratio; 0 is none.
type Bounds struct {
	Controller, Bus, Nodes, Real, Sockets float64
}

// Issue34 are the bounds of issue 34: the controller at most 1.5 times its
// floor and the bus 1.3; controller and bus with real agents at most 1.3
// times what they spend with simulated ones and what a socket of its own
// an agent costs raw JetStream and what checking a report's signature
// costs (Sockets). The simulated nodes are the
// harness, not the mesh: measured, not bounded. Nor is real agents against
// simulated nodes alone, the issue's first wording: that holds ten
// thousand sockets to one, and raw JetStream's bus alone spends more on
// them than the bound allows the mesh's controller and bus together
// (docs/performance.md, "Real agents against their sockets' floor").
var Issue34 = Bounds{Controller: 1.5, Bus: 1.3, Sockets: 1.3}

// Table is one run of mesh bench.
type Table struct {
	// Floor is the median of the floor's rounds, Floors each round in the
	// order measured: one before each simulated push and one after the
	// last, so that push i has Floors[i] before it and Floors[i+1] after.
	Floor  Costs
	Floors []Costs
	// Sockets is the floor of real agents' sockets, measured when the
	// run has real agents.
	Sockets Sockets
	// Ops is the operations of a round of the floor (and of the
	// sockets' floor); Rounds the sockets' floor's.
	Ops, Rounds     int
	Simulated, Real Phase
	Bounds          Bounds
}

// Row is one line of issue 34's table: the mesh's CPU per node and per
// push, each push's, against its floor.
type Row struct {
	Name string
	// Key names the row in --bound.
	Key  string
	Mesh []time.Duration
	// Floor is what the row is held against, and Against says what it is.
	Floor   time.Duration
	Against string
	Bound   float64
	// Around, when it has one a push, is the floor around each push: the
	// mean of the rounds just before and just after it. The ratio is then
	// the median of each push's own against it (Ratio).
	Around []time.Duration
}

// Rows are the table's rows, in issue 34's order. The real agents' row is
// left out when the run had none.
func (t Table) Rows() []Row {
	sim := t.Simulated
	controller := func(c Costs) time.Duration { return c.Sign + 2*c.Read }
	bus := func(c Costs) time.Duration { return 2 * c.Publish }
	nodes := func(c Costs) time.Duration { return c.Sign + c.Read }
	rows := []Row{
		{Name: "controller", Key: "controller", Mesh: perNode(sim.Controller.Pushes, sim.Sent), Floor: controller(t.Floor), Against: "floor: a sign, two reads", Bound: t.Bounds.Controller, Around: t.around(controller)},
		{Name: "bus (nats-server)", Key: "bus", Mesh: perNode(sim.Bus.Pushes, sim.Sent), Floor: bus(t.Floor), Against: "floor: two publishes", Bound: t.Bounds.Bus, Around: t.around(bus)},
		{Name: "simulated nodes", Key: "nodes", Mesh: perNode(sim.Fleet.Pushes, sim.Sent), Floor: nodes(t.Floor), Against: "floor: a sign, a read", Bound: t.Bounds.Nodes, Around: t.around(nodes)},
	}
	if w := sim.Controller.Warmup; len(w) > 0 && len(sim.Sent) > 0 {
		// What the warm-ups leave out, said beside what they leave in:
		// the first push after a start, which faults in the controller's
		// memory, against the same floor and held to no bound.
		rows = append(rows, Row{Name: "controller, its first push (a warm-up)", Key: "first", Mesh: perNode(w[:1], sim.Sent[:1]),
			Floor: rows[0].Floor, Against: rows[0].Against})
	}
	if len(t.Real.Sent) > 0 {
		simulated := Median(perNode(sum(sim.Controller.Pushes, sim.Bus.Pushes), sim.Sent))
		rows = append(rows, Row{Name: "controller + bus, real agents", Key: "real", Mesh: perNode(sum(t.Real.Controller.Pushes, t.Real.Bus.Pushes), t.Real.Sent),
			Floor: simulated, Against: "the same, simulated nodes", Bound: t.Bounds.Real})
		// A real agent made its own keys (issue 29), so the fold checks
		// each of its reports by signature, where a simulated node's MAC
		// is checked in a few µs: a price of one machine's own word, as
		// its socket is of its own connection, measured in the same run.
		rows = append(rows, Row{Name: "the same, sockets and signatures priced in", Key: "sockets", Mesh: rows[len(rows)-1].Mesh,
			Floor: simulated + t.Sockets.Price() + t.Floor.Verify, Against: "simulated, a socket's price, a verify", Bound: t.Bounds.Sockets})
	}
	return rows
}

// around is the floor of op around each simulated push, the mean of the
// rounds just before and just after it; nil unless there is a round
// after each push.
func (t Table) around(op func(Costs) time.Duration) []time.Duration {
	n := len(t.Simulated.Sent)
	if n == 0 || len(t.Floors) != n+1 {
		return nil
	}
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = (op(t.Floors[i]) + op(t.Floors[i+1])) / 2
	}
	return out
}

// Median is the row's figure: the median push (the lower of the middle
// two when there are even many).
func (r Row) Median() time.Duration { return Median(r.Mesh) }

// Ratio is the median of each push against the floor around it, when the
// row has one a push (Around); else the median push against the floor; 0
// when there is no floor. Around each push, because the box's speed moves
// within seconds: the medians of seven pushes and of seven rounds each
// fell in a fast spell and a slow one, and read the bus 1.43x where each
// push against the rounds around it read 1.21x (docs/performance.md, "The
// twenty-fourth session"); over sixteen recorded runs the medians read
// 1.19x on average, spread 0.11, and each push against its rounds 1.17x,
// spread 0.06.
func (r Row) Ratio() float64 {
	if r.Floor <= 0 {
		return 0
	}
	if each := r.each(); each != nil {
		// Of an even many, the mean of the middle two: the lower of them,
		// as Median takes, would read a row low where the medians' ratio
		// took both sides low and cancelled (a review: 2.5% at eight).
		s := slices.Sorted(slices.Values(each))
		if n := len(s); n%2 == 0 {
			return (s[n/2-1] + s[n/2]) / 2
		}
		return s[len(s)/2]
	}
	return r.MediansRatio()
}

// MediansRatio is the median push against the floor (the row's columns),
// 0 when there is no floor.
func (r Row) MediansRatio() float64 {
	if r.Floor <= 0 {
		return 0
	}
	return float64(r.Median()) / float64(r.Floor)
}

// each is every push against the floor around it, nil when the row has
// no floor around each push.
func (r Row) each() []float64 {
	if len(r.Around) != len(r.Mesh) || len(r.Mesh) == 0 {
		return nil
	}
	out := make([]float64, len(r.Mesh))
	for i, m := range r.Mesh {
		if r.Around[i] <= 0 {
			return nil
		}
		out[i] = float64(m) / float64(r.Around[i])
	}
	return out
}

// Measured says whether the row's processes spent any CPU the operating
// system counted: a push of a few nodes can cost the controller less than
// one of /proc's hundredths of a second, and a zero is then no figure at
// all, neither within a bound nor over it.
func (r Row) Measured() bool { return r.Median() > 0 && r.Floor > 0 }

// Over says whether the row has a bound and is measured above it.
func (r Row) Over() bool { return r.Bound > 0 && r.Measured() && r.Ratio() > r.Bound }

// overBy is how far over its bound the row is, as a percentage: whole
// ones, or a tenth when under one, so a row just over never reads "0%".
func (r Row) overBy() string {
	p := (r.Ratio()/r.Bound - 1) * 100
	if p < 1 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}

// Over are the rows that fail the run, over their bound or with a bound
// and no figure, and a sentence naming each ("" when none does).
func (t Table) Over() ([]Row, string) {
	var over, unmeasured []Row
	var said, names []string
	for _, r := range t.Rows() {
		switch {
		case r.Over():
			over = append(over, r)
			said = append(said, fmt.Sprintf("%s at %.2fx (bound %gx, over by %s)", r.Name, r.Ratio(), r.Bound, r.overBy()))
		case r.Bound > 0 && !r.Measured():
			unmeasured = append(unmeasured, r)
			names = append(names, r.Name)
		}
	}
	var parts []string
	if len(over) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d row(s) over their bound: %s", len(over), len(t.Rows()), strings.Join(said, "; ")))
	}
	if len(unmeasured) > 0 {
		parts = append(parts, fmt.Sprintf("%d row(s) with no figure, their processes' CPU a push below what the system counts (%s): give more --nodes or --agents",
			len(unmeasured), strings.Join(names, ", ")))
	}
	return append(over, unmeasured...), strings.Join(parts, "; and ")
}

// Print writes the floor, the rows and each process's figures.
func (t Table) Print(w io.Writer) {
	fmt.Fprintf(w, "floor of this machine, CPU per operation (bus and client in a process of their own, measured before each of the %d simulated push(es) and after the last: the median of those, each the median of three rounds of %d):\n", len(t.Simulated.Sent), t.Ops)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  ed25519 sign of %d bytes\t%s\n", Payload, us(t.Floor.Sign))
	fmt.Fprintf(tw, "  JetStream publish with the mesh's headers\t%s\n", us(t.Floor.Publish))
	fmt.Fprintf(tw, "  ordered read\t%s\n", us(t.Floor.Read))
	fmt.Fprintf(tw, "  ed25519 verify of %d bytes (a report's, for real agents)\t%s\n", ReportPayload, us(t.Floor.Verify))
	tw.Flush()
	fmt.Fprintf(w, "  a round of all four faulted in %s (the median round's own, the median of those)\n", pagesOf(t.Floor.Faults))
	if t.Sockets.Own > 0 {
		// Counted apart: the bus is this process, the hub (the
		// controller's part) and the agents each a process of their own.
		so := t.Sockets
		fmt.Fprintf(w, "\na socket an agent, raw JetStream: CPU per agent of a declaration republished to it and its report acknowledged and read (the median of %d round(s) of %d):\n", t.Rounds, slices.Max(t.Real.Sent))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tbus\thub (the controller's part)\t")
		fmt.Fprintf(tw, "  each agent on a socket of its own, answering within %.1f s (the real agents' span)\t%s\t%s\t\n", so.Span.Seconds(), us(so.Own), us(so.HubOwn))
		fmt.Fprintf(tw, "  the same, every agent answering at once\t%s\t%s\t\n", us(so.Burst), us(so.HubBurst))
		fmt.Fprintf(tw, "  every agent on one shared socket, as the simulated fleet\t%s\t%s\t\n", us(so.Shared), us(so.HubShared))
		tw.Flush()
		fmt.Fprintf(w, "  a socket's price, bus and hub (their own within the span, less shared): %s\n", us(so.Price()))
	}
	warm := "no warm-up push before them"
	if n := len(t.Simulated.Controller.Warmup); n > 0 {
		warm = fmt.Sprintf("after %d warm-up push(es) to each fleet, in no figure but the first push's row", n)
	}
	fmt.Fprintf(w, "\nper node, per push (CPU above idle; the median of %d push(es), min-max in brackets; %s):\n", len(t.Simulated.Sent), warm)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  row\tmesh\tagainst\tratio\tbound\t")
	for _, r := range t.Rows() {
		bound, verdict := "none", ""
		if r.Bound > 0 {
			bound, verdict = fmt.Sprintf("%gx", r.Bound), "within"
			switch {
			case !r.Measured():
				verdict = "NO FIGURE"
			case r.Over():
				verdict = "OVER by " + r.overBy()
			}
		}
		lo, hi := slices.Min(r.Mesh), slices.Max(r.Mesh)
		fmt.Fprintf(tw, "  %s\t%s (%.1f-%.1f)\t%s (%s)\t%.2fx\t%s\t%s\n", r.Name, us(r.Median()), micro(lo), micro(hi), us(r.Floor), r.Against, r.Ratio(), bound, verdict)
	}
	tw.Flush()
	if rows := t.Rows(); rows[0].each() != nil {
		// The columns are medians; the ratio is not their quotient, so
		// that quotient and the pushes' own range are said beside it.
		fmt.Fprintln(w, "  (the controller's, the bus's and the simulated nodes' ratio: the median of each push against the mean of the floor's rounds just before and just after it; against, the floor's median;")
		var said []string
		for _, r := range rows[:3] {
			each := r.each()
			said = append(said, fmt.Sprintf("%s %.2fx (each push against its rounds %.2f-%.2fx)", r.Key, r.MediansRatio(), slices.Min(each), slices.Max(each)))
		}
		fmt.Fprintf(w, "   the column mesh over the column against: %s)\n", strings.Join(said, "; "))
	}
	fmt.Fprintln(w, "\nper process: CPU seconds a push above idle (median, min-max), pages faulted in a push (the median of those, apart from the CPU's), at rest (CPU seconds a second), resident memory after the pushes / at its peak; then the warm-up pushes before the measured ones, held to no bound:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ph := range []Phase{t.Simulated, t.Real} {
		if len(ph.Sent) == 0 {
			continue
		}
		for _, p := range []Process{ph.Controller, ph.Bus, ph.Fleet} {
			fmt.Fprintf(tw, "  %s, %d node(s)\t%s\t%.2f s (%.2f-%.2f)\t%s\tat rest %.3f/s\t%d / %d MiB\t%s\n", ph.Name, slices.Max(ph.Sent), p.Name,
				Median(p.Pushes).Seconds(), slices.Min(p.Pushes).Seconds(), slices.Max(p.Pushes).Seconds(), pagesOf(Median(p.Faults)), p.Idle, p.RSS>>20, p.Peak>>20, warmups(p))
		}
	}
	tw.Flush()
}

// warmups says what each warm-up push cost a process: its CPU above idle
// and the pages it faulted in.
func warmups(p Process) string {
	if len(p.Warmup) == 0 {
		return "no warm-up push"
	}
	said := make([]string, len(p.Warmup))
	for i, d := range p.Warmup {
		said[i] = fmt.Sprintf("%.2f s, %s", d.Seconds(), pagesOf(p.WarmupFaults[i]))
	}
	return "warm-up: " + strings.Join(said, "; ")
}

// pagesOf says a count of pages faulted in, in thousands past ten
// thousand.
func pagesOf(n int64) string {
	switch {
	case n >= 10_000:
		return fmt.Sprintf("%.1fk pages", float64(n)/1000)
	case n == 1:
		return "1 page"
	}
	return fmt.Sprintf("%d pages", n)
}

// perNode divides each push's CPU by the nodes it sent.
func perNode(cpu []time.Duration, sent []int) []time.Duration {
	out := make([]time.Duration, len(cpu))
	for i, c := range cpu {
		out[i] = c / time.Duration(max(sent[i], 1))
	}
	return out
}

func sum(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// Median is the median of d (the lower of the middle two when even
// many; zero for none): a row's figure over its pushes, a floor's over
// its rounds, and the pages faulted in of either.
func Median[T cmp.Ordered](d []T) T {
	if len(d) == 0 {
		var zero T
		return zero
	}
	s := slices.Sorted(slices.Values(d))
	return s[(len(s)-1)/2]
}

// us prints a duration in microseconds with one decimal.
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", micro(d)) }

func micro(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
