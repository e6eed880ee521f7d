package text

import (
	"testing"

	"github.com/meshctl/mesh/wire"
)

// Printable text is shown as it is, ASCII or not; anything a terminal
// would act on (a control character, DEL, bytes that are not UTF-8) is
// quoted, in a single string and in a status table's columns alike.
func TestShownQuotesWhatATerminalWouldActOn(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "",
		"fleet-00001":         "fleet-00001",
		" ~":                  " ~",
		"naïve":               "naïve",
		"a\tb":                `"a\tb"`,
		"well\nwell: 3 nodes": `"well\nwell: 3 nodes"`,
		"\x1b[31mred":         `"\x1b[31mred"`,
		"del\x7f":             `"del\x7f"`,
		"\xff":                `"\xff"`,
	} {
		if got := Shown(in); got != want {
			t.Errorf("Shown(%q) = %s, want %s", in, got, want)
		}
	}
	s := wire.StatusReport{Table: &wire.StatusTable{
		States: []wire.State{wire.StateFailed}, Name: []string{"web-1", "web-2"},
		State: []uint8{0, 0}, Sequence: []uint64{1, 1}, Since: []int64{0, 0},
		Detail: []string{"/etc/motd: denied", "\x1b]0;pwned\x07"},
	}}
	Showable(&s)
	if got := s.Table.Detail; got[0] != "/etc/motd: denied" || got[1] != `"\x1b]0;pwned\a"` {
		t.Fatalf("the table's details are shown as %q", got)
	}
}
