package wire

import (
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
)

// HistoryRequest asks for what a node was told and what it said, in order.
type HistoryRequest struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	Diff  bool      `json:"diff,omitempty"`
}

// History is a node's declarations and reports, in stream order.
type History struct {
	Node    string         `json:"node"`
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one declaration sent or one report received.
type HistoryEntry struct {
	Seq      uint64    `json:"seq"` // stream sequence
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"` // "declaration", "applied", "failed", "refused", "drift", "interrupted", "unreachable", "reachable"
	Sequence uint64    `json:"sequence"`
	Digest   string    `json:"digest"`
	By       string    `json:"by,omitempty"`
	// Operator is who asked for a declaration (issue 33): an operator's
	// name, or the actor that sent it by itself (reconciler, a rollout).
	Operator  string                `json:"operator,omitempty"`
	Builds    []compose.ModuleBuild `json:"builds,omitempty"`
	Resources int                   `json:"resources,omitempty"`
	// BuildsUnknown: the declaration's bytes did not say (mesh audit names why).
	BuildsUnknown bool                     `json:"builds_unknown,omitempty"`
	Changed       int                      `json:"changed,omitempty"` // applied: resources written or removed
	Reason        string                   `json:"reason,omitempty"`
	Highest       uint64                   `json:"highest,omitempty"` // refused: the highest sequence the node had applied
	Failed        []events.ResourceFailure `json:"failed,omitempty"`
	Changes       []compose.Change         `json:"changes,omitempty"` // with diff: against the declaration before
	// Drift's: the paths changed behind the agent's back, and whether it
	// put them back (a corrective change) or only said so.
	Paths     []string `json:"paths,omitempty"`
	Corrected bool     `json:"corrected,omitempty"`
	// Interrupted's: when the agent began the apply it did not finish.
	BeganAt time.Time `json:"began_at,omitzero"`
	// Unreachable's: when the node was last heard, and the silence it
	// outlasted (seconds).
	LastHeard time.Time `json:"last_heard,omitzero"`
	Bound     float64   `json:"bound_seconds,omitempty"`
}
