package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

// A node's command id within a push is the text it always was: a push
// retried across an upgrade must name its appends as before, or the log
// stores them twice. Fails when PerNode's text differs from the Sprintf it
// was for any command id, node or round.
func TestPerNodeIsTheTextItWas(t *testing.T) {
	for _, c := range []struct {
		cmd, node string
		round     int
	}{{"a1b2", "web-1", 0}, {"", "", 7}, {"cmd.with:colons_and-dashes", "bench-09999", 63}, {"x", "n", -1}} {
		sum := sha256.Sum256([]byte(c.node))
		want := fmt.Sprintf("%s.%s.%d", c.cmd, hex.EncodeToString(sum[:6]), c.round)
		if got := PerNode(c.cmd, c.node, c.round); got != want {
			t.Fatalf("PerNode(%q, %q, %d) = %q, want %q", c.cmd, c.node, c.round, got, want)
		}
	}
}
