package compose

import (
	"strings"
	"testing"
)

// DigestIs is Digest compared: true for exactly Digest's text, false for
// the same digest in capitals, another's, one cut short or longer, and
// none. Fails when the fold would take a send whose recorded digest is
// not, byte for byte, the one Digest writes.
func TestDigestIsDigestCompared(t *testing.T) {
	b := []byte(`{"mesh":"m","node":"n"}`)
	d := Digest(b)
	if !DigestIs(b, d) {
		t.Fatalf("DigestIs refuses Digest's own %s", d)
	}
	for _, wrong := range []string{strings.ToUpper(d), Digest([]byte("other")), d[:63], d + "0", ""} {
		if DigestIs(b, wrong) {
			t.Fatalf("DigestIs takes %q for %s", wrong, d)
		}
	}
	if testing.AllocsPerRun(100, func() { DigestIs(b, d) }) != 0 {
		t.Fatal("DigestIs allocates: the fold calls it at every send")
	}
}
