package text

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meshctl/mesh/wire"
)

func Status(out io.Writer, s wire.StatusReport) {
	// Buffered, padded by widths measured once, and each line appended into
	// one reused buffer from the answer's columns as they came: at 100,000
	// nodes a tabwriter writing cell by cell cost more than the answer, and
	// then making a node struct and a formatted line per row cost as much
	// as the rest of the command.
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	if s.AsOf != nil {
		fmt.Fprintf(w, "THE PAST: the mesh as of %s (the log folded up to event %d), not as it is now\n", Time(*s.AsOf), s.Checkpoint)
	}
	rows := newStatusRows(s)
	wName, wSeq, wState := len("NODE"), len("SEQUENCE"), len("STATE")
	var maxSeq uint64
	for i := range rows.Len() {
		c := rows.cells(i)
		wName, wState = max(wName, len(c.name)), max(wState, len(c.state))
		maxSeq = max(maxSeq, c.seq)
	}
	wSeq = max(wSeq, len(strconv.FormatUint(maxSeq, 10)))
	var line []byte
	cell := func(v string, width int) {
		line = append(line, v...)
		line = append(line, padding(max(width-utf8.RuneCountInString(v), 0)+2)...)
	}
	row := func(name string, seq []byte, state, since, detail string) {
		line = line[:0]
		cell(name, wName)
		line = append(append(line, seq...), padding(wSeq-len(seq)+2)...)
		cell(state, wState)
		cell(since, 20)
		line = append(bytes.TrimRight(append(line, detail...), " "), '\n')
		w.Write(line)
	}
	row("NODE", []byte("SEQUENCE"), "STATE", "SINCE", "DETAIL")
	behind, heldBack, lost := 0, 0, 0
	// A fleet's nodes mostly share a few moments: each is formatted once.
	lastSince, sinceText := int64(0), ""
	var seq []byte
	for i := range rows.Len() {
		c := rows.cells(i)
		if !c.well {
			behind++
		}
		switch c.state {
		case wire.StateHeld:
			heldBack++
		case wire.StateUnreachable:
			lost++
		}
		if i == 0 || c.since != lastSince {
			lastSince, sinceText = c.since, Time(time.Unix(c.since, 0))
		}
		seq = strconv.AppendUint(seq[:0], c.seq, 10)
		row(c.name, seq, string(c.state), sinceText, c.detail)
	}
	nodes := rows.Len()
	for _, st := range s.Standings {
		fmt.Fprintf(w, "%s on %s failing %s since %s: %s\n", st.Provider, st.Machine, st.Consumer, Time(st.Since), st.Word)
	}
	for _, c := range s.Chosen {
		fmt.Fprintf(w, "%s on %s receives %s from %s on %s (%s)\n", c.Consumer, c.ConsumerNode, c.Requirement, c.Module, c.Node, c.Why)
	}
	down := 0
	for _, rt := range s.Runtimes {
		if !rt.Well() {
			down++
		}
		fmt.Fprintf(w, "%s on %s %s since %s: %s%s%s\n", rt.Module, rt.Node, rt.State, Time(rt.Since), rt.Detail, ArtifactNote(rt), HealthNote(rt))
	}
	for _, r := range s.Rollouts {
		fmt.Fprintf(w, "rollout %s; %d of %d node(s) applied its build\n", RolloutLine(r.Rollout), r.Applied, r.Total)
	}
	for _, r := range s.Rotations {
		fmt.Fprintln(w, RotationLine(r))
	}
	for _, c := range s.Causes {
		fmt.Fprintf(w, "not well: %s\n", c)
	}
	if s.OpenBus {
		fmt.Fprintln(w, "warning: the bus is open (mesh serve --open-bus): the log's writers are not enforced; anyone who reaches the bus may write to it, and only the fold sets aside what is not its rightful writer's (close it with mesh bus-config and --closed)")
	}
	if s.LivenessOff {
		fmt.Fprintln(w, "liveness is off (--unreachable-after off): a node whose agent died is not named")
	}
	if r := s.Reconciler; r != nil {
		fmt.Fprintln(w, ReconcilerLine(r))
		for _, l := range r.Left {
			fmt.Fprintf(w, "reconciler leaves %s to people: %s\n", l.Node, l.Reason)
		}
	}
	if s.UnreachableAfter > 0 {
		// The bound, where the operator sees the states it decides.
		fmt.Fprintf(w, "a node silent for %s is unreachable (mesh up or serve --unreachable-after)\n", time.Duration(s.UnreachableAfter*float64(time.Second)))
	}
	switch {
	case !s.Well && behind == 0 && len(s.Standings) == 0 && down > 0:
		fmt.Fprintf(w, "not well: %d node(s) current, nothing failing, but %d program(s) not running or unhealthy\n", nodes, down)
	case !s.Well && behind == 0 && len(s.Standings) == 0:
		fmt.Fprintf(w, "not well: %d node(s) current, nothing failing, but for the above\n", nodes)
	case s.Well && nodes == 0:
		fmt.Fprintln(w, "well: no active nodes, and nothing is failing")
	case s.Well && len(s.Runtimes) > 0:
		fmt.Fprintf(w, "well: all %d node(s) current%s, all %d program(s) running, nothing failing\n", nodes, HeldNote(heldBack), len(s.Runtimes))
	case s.Well:
		fmt.Fprintf(w, "well: all %d node(s) current%s, nothing failing\n", nodes, HeldNote(heldBack))
	case lost > 0:
		fmt.Fprintf(w, "not well: %d of %d node(s) not current, %d of them unreachable, %d provider(s) failing a consumer\n", behind, nodes, lost, len(s.Standings))
	default:
		fmt.Fprintf(w, "not well: %d of %d node(s) not current, %d provider(s) failing a consumer\n", behind, nodes, len(s.Standings))
	}
}

// HealthNote says a running program's health after its detail: "" for
// a program without a check (its health is that it runs) or not running
// (its state says more than its last check).
func HealthNote(rt wire.Runtime) string {
	if rt.State != wire.RuntimeRunning {
		return ""
	}
	switch rt.Health {
	case wire.HealthHealthy:
		return "; healthy since " + Time(rt.HealthSince)
	case wire.HealthUnhealthy:
		return "; unhealthy since " + Time(rt.HealthSince) + ": " + Shown(rt.HealthDetail)
	case wire.HealthStarting:
		return "; starting: its health check has not passed yet"
	}
	return ""
}

// HeldNote says how many current nodes hold an older build on purpose.
func HeldNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d held on an older build by policy or a rollout)", n)
}

// statusRows are status's lines however the answer carried them: the brief
// table the command line asks for, or whole nodes.
type statusRows struct {
	s wire.StatusReport
	// wells is whether each of the table's states leaves the mesh well.
	wells []bool
}

func newStatusRows(s wire.StatusReport) statusRows {
	r := statusRows{s: s}
	if t := s.Table; t != nil {
		r.wells = make([]bool, len(t.States))
		for k, state := range t.States {
			r.wells[k] = wire.WellState(state)
		}
	}
	return r
}

func (r statusRows) Len() int {
	if t := r.s.Table; t != nil {
		return t.Len()
	}
	return len(r.s.Nodes)
}

// rowCells is what a line of the table shows of one node.
type rowCells struct {
	name, detail string
	state        wire.State
	well         bool
	seq          uint64
	since        int64 // unix seconds
}

// cells is row i's cells, read from the table's columns as they are
// rather than as a node's whole status (StatusTable.Row): at 100,000 nodes a status
// and a lookup of its state's wellness a row were a quarter of printing.
func (r statusRows) cells(i int) rowCells {
	t := r.s.Table
	if t == nil {
		n := r.s.Nodes[i]
		return rowCells{name: n.Name, detail: n.Detail, state: n.State, well: wire.WellState(n.State), seq: n.Sequence, since: n.Since.Unix()}
	}
	c := rowCells{name: t.Name[i], detail: t.Detail[i], seq: t.Sequence[i], since: t.Since[i]}
	if k := int(t.State[i]); k < len(t.States) {
		c.state, c.well = t.States[k], r.wells[k]
	}
	return c
}

// ReconcilerLine says what the reconciler is doing: its bound, the nodes
// queued for its next windows (the first of them named), what it sent
// since the controller started, and how many behind nodes it leaves to
// people (each named on a line of its own, up to ten).
func ReconcilerLine(r *wire.ReconcilerStatus) string {
	every := time.Duration(r.EverySeconds * float64(time.Second))
	line := fmt.Sprintf("reconciler on (at most %d declaration(s) every %s): ", r.AtMost, every)
	switch {
	case r.Queued == 0:
		line += "nothing queued"
	case r.Queued > len(r.Next):
		line += fmt.Sprintf("%d node(s) queued (%s, ...)", r.Queued, strings.Join(r.Next, ", "))
	default:
		line += fmt.Sprintf("%d node(s) queued (%s)", r.Queued, strings.Join(r.Next, ", "))
	}
	line += fmt.Sprintf(", %d sent since the controller started", r.Sent)
	if r.LeftCount > 0 {
		line += fmt.Sprintf(", %d behind node(s) left to people", r.LeftCount)
	}
	return line
}

// RotationLine says where one pair's last rotation is: in its overlap
// (both credentials accepted, whom it waits on, until when at most), or
// completed (when, why).
func RotationLine(r wire.RotationStage) string {
	what := fmt.Sprintf("rotation of the credentials %s mints for %s to generation %d", r.Provider, r.Consumer, r.Generation)
	at := Time
	switch r.Stage {
	case wire.RotationOverlap:
		waits := "every consumer end applied it; the controller drops the old at its next drive, unless a provider end cannot be composed (its state above says why)"
		if len(r.Waiting) > 0 {
			waits = "waiting on " + strings.Join(r.Waiting, ", ") + " to apply it"
		}
		return fmt.Sprintf("%s: overlap, the old and the new accepted until %s at most; %s", what, at(r.Until), waits)
	case wire.RotationCompleted:
		return fmt.Sprintf("%s: completed %s (%s), the old dropped", what, at(r.CompletedAt), r.Reason)
	}
	return fmt.Sprintf("%s: at once %s, no overlap", what, at(r.At))
}

// spaces pads the cells of a table: a slice of it rather than a space
// appended at a time, a fifth of printing a status of 100,000 nodes.
const spaces = "                                                                "

// padding is n spaces (none for n below one).
func padding(n int) string {
	if n <= 0 {
		return ""
	}
	if n <= len(spaces) {
		return spaces[:n]
	}
	return strings.Repeat(" ", n)
}
