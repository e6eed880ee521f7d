package scan

import (
	"bytes"
	"fmt"
	"testing"
)

// TestArenaHandsBackEachRowCapped holds Rows' arena to what a slice a
// row gave: every key and value as added, across chunks and for a row
// larger than a chunk, and an append to one row copies instead of writing
// over the next row's bytes (the fold keeps rows and appends to them).
func TestArenaHandsBackEachRowCapped(t *testing.T) {
	var a arena
	var wantK, wantV [][]byte
	for i := range 3000 {
		k := []byte(fmt.Sprintf("k%05d", i))
		v := bytes.Repeat([]byte{byte(i)}, 100+i%50)
		if i == 1500 {
			v = bytes.Repeat([]byte{7}, 2*arenaChunk)
		}
		a.add(k, v)
		wantK, wantV = append(wantK, k), append(wantV, v)
	}
	if len(a.chunks) < 3 {
		t.Fatalf("%d chunks: the test does not cross chunks", len(a.chunks))
	}
	keys, values := a.rows()
	if len(keys) != len(wantK) || len(values) != len(wantV) {
		t.Fatalf("%d keys, %d values, want %d", len(keys), len(values), len(wantK))
	}
	_ = append(values[0], 0xff, 0xff, 0xff)
	_ = append(keys[1], 0xff)
	for i := range wantK {
		if !bytes.Equal(keys[i], wantK[i]) || !bytes.Equal(values[i], wantV[i]) {
			t.Fatalf("row %d: key %q value of %d bytes, want %q of %d", i, keys[i], len(values[i]), wantK[i], len(wantV[i]))
		}
	}
}
