package text

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/wire"
)

// history prints an interrupted apply as its own line, saying when the
// apply began and that its files were part new, part old; --json carries
// the kind and began_at.
func TestHistoryPrintsAnInterruptedApply(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 5, 0, time.UTC)
	e := wire.HistoryEntry{Seq: 12, At: at, Kind: "interrupted", Sequence: 2, Digest: "f1850b411b9b13d9", BeganAt: at.Add(-5 * time.Second)}
	var out bytes.Buffer
	Entry(&out, e, false)
	if got := out.String(); !strings.Contains(got, "interrupted sequence 2") || !strings.Contains(got, "began applying it at 2026-12-04T10:00:00Z") ||
		!strings.Contains(got, "part new, part old") {
		t.Fatalf("an interrupted apply printed as %q", got)
	}
	b, _ := json.Marshal(e)
	if !strings.Contains(string(b), `"kind":"interrupted"`) || !strings.Contains(string(b), `"began_at":"2026-12-04T10:00:00Z"`) {
		t.Fatalf("an interrupted apply in --json: %s", b)
	}
}
