package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// StatusTable is the nodes of a brief status by column, row i of each
// column one node. State indexes States.
type StatusTable struct {
	States   []State
	Name     []string
	State    []uint8
	Sequence []uint64
	Since    []int64 // unix seconds
	Detail   []string
	// DetailsOnce writes each distinct detail once (statusTableJSON's
	// DetailIs), for a reader that asked for it (StatusRequest's): a
	// reader from before it took the details one a row, and read the
	// other form as columns that disagree (a command line) or put them
	// on the wrong rows (a page open across the controller's upgrade).
	DetailsOnce bool
}

// Add appends one node's row.
func (t *StatusTable) Add(n NodeStatus) {
	i := slices.Index(t.States, n.State)
	if i < 0 {
		i = len(t.States)
		t.States = append(t.States, n.State)
	}
	t.Name = append(t.Name, n.Name)
	t.State = append(t.State, uint8(i))
	t.Sequence = append(t.Sequence, n.Sequence)
	t.Since = append(t.Since, n.Since.Unix())
	t.Detail = append(t.Detail, n.Detail)
}

// Len is how many rows the table holds.
func (t *StatusTable) Len() int { return len(t.Name) }

// Row is the table's row i, as Nodes would hold it without digests.
func (t *StatusTable) Row(i int) NodeStatus {
	var state State
	if int(t.State[i]) < len(t.States) {
		state = t.States[t.State[i]]
	}
	return NodeStatus{Name: t.Name[i], State: state, Sequence: t.Sequence[i], Since: time.Unix(t.Since[i], 0).UTC(), Detail: t.Detail[i]}
}

// Rows is the table's nodes, as Nodes would hold them without digests.
func (t *StatusTable) Rows() []NodeStatus {
	out := make([]NodeStatus, t.Len())
	for i := range out {
		out[i] = t.Row(i)
	}
	return out
}

// statusTableJSON is the table as it crosses the bus and the page reads
// it: the names one string, a line each (a node name has no line break,
// events.ValidateName); the sequences one string of runs, "value*rows"
// or a value alone, a comma between (a fleet pushed together shares
// them); the moments likewise, as seconds after the earliest (SinceFrom),
// short numbers even where each node reported at a second of its own;
// the details only where there is one, each distinct one once (Detail),
// the rows that have one (DetailAt) and which each is (DetailIs, runs of
// indexes into Detail). As a column of JSON values
// each, 100,000 nodes were some 3 MB whose decoding (a string or number
// at a time, each column grown as it went) took the command line about
// half of `mesh status`'s time end to end (issue 34: the first status at
// 100,000 nodes under 300 ms). Runs as JSON arrays, [value, rows],
// decoded slower than that plain column when every node's moment was its
// own (BenchmarkStatusTable). A detail a row with one was 11 MB of the
// 12 a status of 100,000 nodes lost together (each "silent for over 20s
// (last heard ...); its last state: current", a few seconds between them)
// and most of its writing and reading, 0.6-0.7 s of `mesh status` end to
// end; the same sentences once each, the rest indexes, when the reader
// asked for that (StatusTable.DetailsOnce). A table without DetailIs (a
// reader that did not ask, a controller before it) holds a detail a
// row, in order.
type statusTableJSON struct {
	States    []State  `json:"states"`
	Names     string   `json:"names"`
	State     []uint8  `json:"state"`      // base64, as Go writes bytes
	Sequence  string   `json:"sequence"`   // runs
	SinceFrom int64    `json:"since_from"` // unix seconds
	Since     string   `json:"since"`      // runs of seconds after SinceFrom
	DetailAt  []int    `json:"detail_at"`
	Detail    []string `json:"detail"`
	DetailIs  string   `json:"detail_is,omitempty"` // runs
}

// MarshalJSON writes the table in its brief form (statusTableJSON).
func (t StatusTable) MarshalJSON() ([]byte, error) {
	for _, n := range t.Name {
		if strings.Contains(n, "\n") {
			return nil, fmt.Errorf("node name %q holds a line break, which no node name may", n)
		}
	}
	out := statusTableJSON{States: t.States, Names: strings.Join(t.Name, "\n"), State: t.State, DetailAt: []int{}, Detail: []string{}}
	if len(t.Since) > 0 {
		out.SinceFrom = slices.Min(t.Since)
	}
	since := make([]uint64, len(t.Since))
	for i, s := range t.Since {
		since[i] = uint64(s - out.SinceFrom)
	}
	out.Since, out.Sequence = runsOf(since), runsOf(t.Sequence)
	if out.States == nil {
		out.States = []State{}
	}
	index := map[string]uint64{}
	var is []uint64
	for i, d := range t.Detail {
		if d == "" {
			continue
		}
		if !t.DetailsOnce {
			out.DetailAt, out.Detail = append(out.DetailAt, i), append(out.Detail, d)
			continue
		}
		k, seen := index[d]
		if !seen {
			k = uint64(len(out.Detail))
			index[d] = k
			out.Detail = append(out.Detail, d)
		}
		out.DetailAt, is = append(out.DetailAt, i), append(is, k)
	}
	if t.DetailsOnce {
		out.DetailIs = runsOf(is)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the brief form back into columns, and refuses one
// whose columns disagree on how many rows there are.
func (t *StatusTable) UnmarshalJSON(b []byte) error {
	// The form before (a JSON value a row, its names under "name"), from
	// a controller or a command line of another version: said so, not
	// left to a type error of the decoder's. A quote inside a string is
	// escaped, so the key cannot match a node's detail.
	if bytes.Contains(b, []byte(`"name":[`)) {
		return errors.New("the status table is in the form of another version of mesh (a value a row): run a mesh command line of the controller's version")
	}
	var in statusTableJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	n := 0
	if in.Names != "" {
		n = strings.Count(in.Names, "\n") + 1
	}
	*t = StatusTable{States: in.States, State: in.State, Name: []string{}, Detail: make([]string, n)}
	if n > 0 {
		t.Name = strings.Split(in.Names, "\n")
	}
	var err error
	if t.Sequence, err = rowsOfRuns(in.Sequence, n, "sequence"); err != nil {
		return err
	}
	since, err := rowsOfRuns(in.Since, n, "since")
	if err != nil {
		return err
	}
	t.Since = make([]int64, n)
	for i, s := range since {
		t.Since[i] = in.SinceFrom + int64(s)
	}
	if len(t.State) != n {
		return fmt.Errorf("a status table of %d names with %d states: its columns disagree", n, len(t.State))
	}
	var is []uint64
	if in.DetailIs == "" {
		// A detail a row, in order: not asked for once each, or a
		// controller before DetailIs.
		if len(in.DetailAt) != len(in.Detail) {
			return fmt.Errorf("a status table with %d details at %d rows: its columns disagree", len(in.Detail), len(in.DetailAt))
		}
		is = make([]uint64, len(in.Detail))
		for k := range is {
			is[k] = uint64(k)
		}
	} else if is, err = rowsOfRuns(in.DetailIs, len(in.DetailAt), "detail_is"); err != nil {
		return err
	}
	for k, i := range in.DetailAt {
		if i < 0 || i >= n {
			return fmt.Errorf("a status table of %d rows with a detail at row %d", n, i)
		}
		if is[k] >= uint64(len(in.Detail)) {
			return fmt.Errorf("a status table of %d details whose row %d has detail %d", len(in.Detail), i, is[k])
		}
		t.Detail[i] = in.Detail[is[k]]
	}
	return nil
}

// runsOf is column as runs: "value*rows" for a value on more than one
// row in a row, the value alone for one, a comma between.
func runsOf(column []uint64) string {
	var b []byte
	for i := 0; i < len(column); {
		v, n := column[i], 1
		for i+n < len(column) && column[i+n] == v {
			n++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, v, 10)
		if n > 1 {
			b = strconv.AppendInt(append(b, '*'), int64(n), 10)
		}
		i += n
	}
	return string(b)
}

// rowsOfRuns is runs (runsOf) as a column of n rows, or why they are not.
func rowsOfRuns(runs string, n int, name string) ([]uint64, error) {
	column := make([]uint64, 0, n)
	for run := range strings.SplitSeq(runs, ",") {
		if run == "" && runs == "" {
			break
		}
		value, count, many := strings.Cut(run, "*")
		v, err := strconv.ParseUint(value, 10, 64)
		rows := 1
		if err == nil && many {
			rows, err = strconv.Atoi(count)
		}
		if err != nil || rows < 1 || len(column)+rows > n {
			return nil, fmt.Errorf("a status table of %d rows whose %s runs hold more, or a run %q that is not one", n, name, run)
		}
		for range rows {
			column = append(column, v)
		}
	}
	if len(column) != n {
		return nil, fmt.Errorf("a status table of %d rows whose %s runs hold %d", n, name, len(column))
	}
	return column, nil
}
