package wire

import (
	"encoding/json"
	"fmt"
	"slices"
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
// events.ValidateName); the sequences and moments as runs of one value,
// [value, how many rows], since a fleet pushed together shares them; the
// details only where there is one, by row. As a column of JSON values
// each, 100,000 nodes were some 3 MB whose decoding (a string or number
// at a time, each column grown as it went) took the command line about
// half of `mesh status`'s time end to end (issue 34: the first status at
// 100,000 nodes under 300 ms).
type statusTableJSON struct {
	States   []State    `json:"states"`
	Names    string     `json:"names"`
	State    []uint8    `json:"state"` // base64, as Go writes bytes
	Sequence [][2]int64 `json:"sequence"`
	Since    [][2]int64 `json:"since"`
	DetailAt []int      `json:"detail_at"`
	Detail   []string   `json:"detail"`
}

// MarshalJSON writes the table in its brief form (statusTableJSON).
func (t StatusTable) MarshalJSON() ([]byte, error) {
	for _, n := range t.Name {
		if strings.Contains(n, "\n") {
			return nil, fmt.Errorf("node name %q holds a line break, which no node name may", n)
		}
	}
	out := statusTableJSON{States: t.States, Names: strings.Join(t.Name, "\n"), State: t.State,
		Since: runsOf(t.Since), DetailAt: []int{}, Detail: []string{}}
	seq := make([]int64, len(t.Sequence))
	for i, s := range t.Sequence {
		seq[i] = int64(s)
	}
	out.Sequence = runsOf(seq)
	if out.States == nil {
		out.States = []State{}
	}
	for i, d := range t.Detail {
		if d != "" {
			out.DetailAt, out.Detail = append(out.DetailAt, i), append(out.Detail, d)
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the brief form back into columns, and refuses one
// whose columns disagree on how many rows there are.
func (t *StatusTable) UnmarshalJSON(b []byte) error {
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
	seq, err := rowsOfRuns(in.Sequence, n, "sequence")
	if err != nil {
		return err
	}
	t.Sequence = make([]uint64, n)
	for i, s := range seq {
		t.Sequence[i] = uint64(s)
	}
	if t.Since, err = rowsOfRuns(in.Since, n, "since"); err != nil {
		return err
	}
	if len(t.State) != n || len(in.DetailAt) != len(in.Detail) {
		return fmt.Errorf("a status table of %d names with %d states and %d details at %d rows: its columns disagree", n, len(t.State), len(in.Detail), len(in.DetailAt))
	}
	for k, i := range in.DetailAt {
		if i < 0 || i >= n {
			return fmt.Errorf("a status table of %d rows with a detail at row %d", n, i)
		}
		t.Detail[i] = in.Detail[k]
	}
	return nil
}

// runsOf is column as runs of one value: [value, how many].
func runsOf(column []int64) [][2]int64 {
	runs := [][2]int64{}
	for _, v := range column {
		if k := len(runs) - 1; k >= 0 && runs[k][0] == v {
			runs[k][1]++
			continue
		}
		runs = append(runs, [2]int64{v, 1})
	}
	return runs
}

// rowsOfRuns is runs as a column of n rows, or why they are not.
func rowsOfRuns(runs [][2]int64, n int, name string) ([]int64, error) {
	column := make([]int64, 0, n)
	for _, r := range runs {
		if r[1] < 1 || int64(len(column))+r[1] > int64(n) {
			return nil, fmt.Errorf("a status table of %d rows whose %s runs hold more, or a run of none", n, name)
		}
		for range r[1] {
			column = append(column, r[0])
		}
	}
	if len(column) != n {
		return nil, fmt.Errorf("a status table of %d rows whose %s runs hold %d", n, name, len(column))
	}
	return column, nil
}
