package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A brief table crosses the bus and comes back the same, row for row:
// runs of sequences and moments that change, details only on some rows
// (one of several lines), no rows at all. Fails when a run, a detail's
// row or a name is lost or moved.
func TestAStatusTableComesBackRowForRow(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	rows := []NodeStatus{
		{Name: "a", State: StateCurrent, Sequence: 2, Since: at},
		{Name: "b", State: StateCurrent, Sequence: 2, Since: at},
		{Name: "c", State: StateFailed, Sequence: 3, Since: at.Add(time.Second), Detail: "exit 1:\nno such file"},
		{Name: "d", State: StateCurrent, Sequence: 2, Since: at},
		{Name: "e-1", State: StateNeverSent, Since: time.Unix(0, 0).UTC()},
	}
	var table StatusTable
	for _, r := range rows {
		table.Add(r)
	}
	b, err := json.Marshal(StatusReport{Table: &table})
	if err != nil {
		t.Fatal(err)
	}
	var back StatusReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rows, back.Table.Rows()); diff != "" {
		t.Fatalf("the table as it came back (-sent +got):\n%s", diff)
	}
	// Runs, not a value a row: four rows share sequence 2 in three runs;
	// the moments counted from the earliest (e-1's, the epoch).
	var raw struct {
		Table statusTableJSON `json:"table"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || raw.Table.Sequence != "2*2,3,2,0" || len(raw.Table.Detail) != 1 || raw.Table.SinceFrom != 0 {
		t.Fatalf("the table as written: %s (%v)", b, err)
	}

	var empty StatusTable
	b, err = json.Marshal(&empty)
	if err != nil {
		t.Fatal(err)
	}
	var none StatusTable
	if err := json.Unmarshal(b, &none); err != nil || none.Len() != 0 {
		t.Fatalf("an empty table came back as %d rows (%v) from %s", none.Len(), err, b)
	}
}

// A detail many rows share crosses the bus once (a fleet lost together
// says one sentence of each few seconds), and comes back on every row it
// was on; a table from a controller before that, a detail a row, still
// reads. Fails when a shared detail is written more than once or lands on
// another row.
func TestAStatusTableWritesADetailOnce(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	lost := func(s string) string { return "silent for over 20s (last heard " + s + "); its last state: current" }
	var rows []NodeStatus
	for i := range 50 {
		d := lost("21:07:09")
		switch {
		case i%7 == 3:
			d = lost("21:07:10")
		case i%11 == 5:
			d = ""
		}
		rows = append(rows, NodeStatus{Name: "n-" + strconv.Itoa(i), State: StateUnreachable, Sequence: 2, Since: at, Detail: d})
	}
	table := StatusTable{DetailsOnce: true}
	for _, r := range rows {
		table.Add(r)
	}
	// Asked for once each, and not (a reader from before): the same rows
	// come back either way, the sentences written 2 times or 46.
	for once, times := range map[bool]int{true: 2, false: 46} {
		table.DetailsOnce = once
		b, err := json.Marshal(&table)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "silent for over"); n != times {
			t.Fatalf("details once each %v: written %d times, want %d: %s", once, n, times, b)
		}
		// Read as a reader from before reads them: a detail a row.
		var before struct {
			DetailAt []int    `json:"detail_at"`
			Detail   []string `json:"detail"`
		}
		if err := json.Unmarshal(b, &before); err != nil || !once && len(before.Detail) != len(before.DetailAt) {
			t.Fatalf("not asked for once each, a reader from before reads %d details at %d rows (%v)", len(before.Detail), len(before.DetailAt), err)
		}
		var back StatusTable
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rows, back.Rows()); diff != "" {
			t.Fatalf("details once each %v: the table as it came back (-sent +got):\n%s", once, diff)
		}
	}

	before := `{"states":["failed"],"names":"a\nb\nc","state":"AAAA","sequence":"1*3","since":"0*3","detail_at":[0,2],"detail":["x","y"]}`
	var old StatusTable
	if err := json.Unmarshal([]byte(before), &old); err != nil || old.Len() != 3 || old.Row(0).Detail != "x" || old.Row(1).Detail != "" || old.Row(2).Detail != "y" {
		t.Fatalf("a table with a detail a row read as %+v (%v)", old.Rows(), err)
	}
}

// A table whose columns disagree on their rows is refused, whole, with
// what disagrees: read as it came, a row would show another node's state.
func TestAStatusTableWhoseColumnsDisagreeIsRefused(t *testing.T) {
	for name, text := range map[string]string{
		"a state short":      `{"states":["current"],"names":"a\nb","state":"AA==","sequence":"1*2","since":"0*2","detail_at":[],"detail":[]}`,
		"a run too long":     `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*3","since":"0*2","detail_at":[],"detail":[]}`,
		"a run short":        `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0","detail_at":[],"detail":[]}`,
		"a detail past":      `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[2],"detail":["x"]}`,
		"a detail at none":   `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[0,1],"detail":["x"]}`,
		"an empty run":       `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*0,1*2","since":"0*2","detail_at":[],"detail":[]}`,
		"a run not one":      `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1,x","since":"0*2","detail_at":[],"detail":[]}`,
		"a value negative":   `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"-1*2","detail_at":[],"detail":[]}`,
		"a detail not one":   `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[0,1],"detail":["x"],"detail_is":"0,1"}`,
		"details short":      `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[0,1],"detail":["x"],"detail_is":"0"}`,
		"details at none":    `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[],"detail":["x"],"detail_is":"0"}`,
		"a detail at no row": `{"states":["current"],"names":"a\nb","state":"AAA=","sequence":"1*2","since":"0*2","detail_at":[],"detail":["x"]}`,
	} {
		var tb StatusTable
		if err := json.Unmarshal([]byte(text), &tb); err == nil || !strings.Contains(err.Error(), "status table") {
			t.Errorf("%s: read as %d rows (%v), want refused", name, tb.Len(), err)
		}
	}
	// The form before, from a controller of another version: one sentence
	// that says so, not the decoder's type error.
	old := `{"states":["current"],"name":["a","b"],"state":"AAA=","sequence":[1,1],"since":[0,0],"detail":["",""]}`
	var tb StatusTable
	if err := json.Unmarshal([]byte(old), &tb); err == nil || !strings.Contains(err.Error(), "another version of mesh") {
		t.Errorf("a table in the form before: %v, want it named as another version's", err)
	}
	if _, err := json.Marshal(StatusTable{Name: []string{"a\nb"}, State: []uint8{0}, Sequence: []uint64{1}, Since: []int64{0}, Detail: []string{""}}); err == nil {
		t.Error("a name with a line break was written, and would come back as two")
	}
}
