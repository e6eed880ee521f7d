package agent

import (
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
)

// When the tries after a wake-up or a reconnect stop. Each row is a case
// an agent met; the wrong answer in the first three left it one behind
// until its next check, in the last two read for ever.
func TestSettledStopsOnlyOnceWhatWasHeardIsRead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		found          bool
		read, heard    uint64
		afterReconnect bool
		since          time.Duration
		want           bool
	}{
		{"two sends heard as one wake-up, the older read", true, 7, 8, false, time.Millisecond, false},
		{"after a reconnect, an older unread one found", true, 7, 0, true, time.Millisecond, false},
		{"after a reconnect, what was heard read", true, 8, 8, true, time.Millisecond, false},
		{"what was heard read", true, 8, 8, false, time.Millisecond, true},
		{"heard and already read (a wake-up for one the reconnect read)", false, 8, 8, false, time.Millisecond, true},
		{"nothing heard with a number, one found", true, 3, 0, false, time.Millisecond, true},
		{"nothing heard with a number, nothing found", false, 3, 0, false, time.Millisecond, false},
		{"a refused publish: heard, never stored, the window ends", false, 7, 8, false, wakeFor + time.Millisecond, true},
		{"a reconnect's window ends", false, 7, 0, true, wakeFor + time.Millisecond, true},
	}
	for _, c := range cases {
		if got := settled(c.found, c.read, c.heard, c.afterReconnect, c.since); got != c.want {
			t.Errorf("%s: settled = %v, want %v", c.name, got, c.want)
		}
	}
}

// The number a wake-up names is read from the event as the controller
// appends it; anything else names none.
func TestHeardNumberReadsADeclarationsNumberOnly(t *testing.T) {
	t.Parallel()
	agg := events.NodeAggregate("web-1")
	sent, err := events.Encode(agg, "cmd", "", 0, time.Now(), events.DeclarationSent{Node: "web-1", Sequence: 42})
	if err != nil {
		t.Fatal(err)
	}
	other, err := events.Encode(agg, "cmd", "", 0, time.Now(), events.NodeRetired{Name: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want uint64
	}{
		{"a declaration", sent, 42},
		{"another event on the subject", other, 0},
		{"an answer someone aimed at the subject", []byte(`{"data":{"sequence":99}}`), 0},
		{"not JSON", []byte("+OK"), 0},
	} {
		if got := heardNumber(c.data); got != c.want {
			t.Errorf("%s: heardNumber = %d, want %d", c.name, got, c.want)
		}
	}
}
