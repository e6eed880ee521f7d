package wire

import (
	"time"

	"github.com/meshctl/mesh/compose"
)

// StatusReport is `mesh status --json`: the verdict, a state per active
// node, and every standing.
type StatusReport struct {
	// AsOf is set when this is the past: the mesh as the log had it then.
	AsOf       *time.Time     `json:"as_of,omitempty"`
	Well       bool           `json:"well"`
	Nodes      []NodeStatus   `json:"nodes"`
	Standings  []StandingView `json:"standings"`
	Checkpoint uint64         `json:"checkpoint"`
	// Causes are why the mesh is not well beyond its nodes and standings:
	// the fold stopped or behind, foreign messages not acknowledged.
	Causes []string `json:"causes"`
	// Runtimes are the programs of modules that run, as their agents last
	// reported them; the mesh is not well while one is not running.
	Runtimes []Runtime `json:"runtimes"`
	// Rollouts are those under way, paused or halted (a halted one is a
	// cause: the mesh is not well until it is aborted), with progress.
	Rollouts []RolloutProgress `json:"rollouts"`
	// Rotations are the last rotation of each pair ever rotated, with its
	// stage: in its overlap (both credentials accepted) or completed.
	Rotations []RotationStage `json:"rotations"`
	// Table holds the nodes instead of Nodes when Brief was asked: what the
	// table shows, a column at a time. A hundred thousand nodes as objects
	// were 10.7 MB of JSON, most of the answer's time.
	Table *StatusTable `json:"table,omitempty"`
	// UnreachableAfter is the silence, in seconds, after which a node
	// that said anything is unreachable (0: liveness is off, or the past).
	UnreachableAfter float64 `json:"unreachable_after_seconds"`
	// LivenessOff: this controller hears no agent (--unreachable-after
	// off), so a dead node is not named; status says so.
	LivenessOff bool `json:"liveness_off,omitempty"`
	// OpenBus: the controller serves a bus nobody closed (mesh serve
	// --open-bus), so the log's writers are not enforced; status says so.
	OpenBus bool `json:"open_bus,omitempty"`
	// Chosen is which provider each consumer would receive, and why,
	// wherever there was a choice: for the requirements that more than
	// one provider serves (issue 31). Empty while each has one provider.
	Chosen []ConsumerChoice `json:"chosen,omitempty"`
	// Reconciler is what this controller's reconciler is doing (mesh up
	// --reconcile, rule 27); absent when it is off, or the past.
	Reconciler *ReconcilerStatus `json:"reconciler,omitempty"`
}

// ReconcilerStatus is the reconciler at work: its bound, the nodes it
// will send next, and how many it sent since the controller started.
type ReconcilerStatus struct {
	// AtMost declarations every EverySeconds seconds: its bound.
	AtMost       int     `json:"at_most"`
	EverySeconds float64 `json:"every_seconds"`
	// Queued is how many nodes wait for their turn; Next names the first
	// of them (at most ten).
	Queued int      `json:"queued"`
	Next   []string `json:"next"`
	// Sent is how many declarations it sent since this controller started.
	Sent uint64 `json:"sent"`
	// Left are nodes behind that it leaves to people, with why (a node
	// held by a hand declaration, in a rollout, of a module whose
	// reconcile is never, or one that failed or refused what it would be
	// sent again); at most ten, LeftCount in all.
	Left      []UnsentNode `json:"left"`
	LeftCount int          `json:"left_count"`
}

// ConsumerChoice is one consumer's provider as status names it: the
// consumer's node beside what compose says it receives and why.
type ConsumerChoice struct {
	ConsumerNode string `json:"consumer_node"`
	compose.Chosen
}

// NodeStatus is one node's line in status.
type NodeStatus struct {
	Name          string     `json:"name"`
	State         State      `json:"state"`
	Sequence      uint64     `json:"sequence"`
	Digest        string     `json:"digest"`
	Since         time.Time  `json:"since"`
	Detail        string     `json:"detail,omitempty"`
	ContentDigest string     `json:"content_digest,omitempty"`
	WouldSend     string     `json:"would_send,omitempty"`
	By            string     `json:"by,omitempty"`
	FailingSince  *time.Time `json:"failing_since,omitempty"`
	Address       string     `json:"address,omitempty"` // its overlay address
	// LastHeard is when this controller last heard the node's agent (nil:
	// not since it started).
	LastHeard *time.Time `json:"last_heard,omitempty"`
}

// RolloutProgress is a rollout as status lists it: where it stands, and
// how many of its nodes hold its build and applied it.
type RolloutProgress struct {
	Rollout
	// Applied: nodes of its waves on its build and current (or held, or
	// partial: what was asked of this module is what runs). Total: the
	// nodes of its waves still active.
	Applied int `json:"applied"`
	Total   int `json:"total"`
}

// RotationStep names a rotation's stage on the wire.
type RotationStep string

const (
	RotationOverlap   RotationStep = "overlap"
	RotationCompleted RotationStep = "completed"
	RotationAtOnce    RotationStep = "at once"
)

// RotationStage is one pair's last rotation (mesh rotate) and where it is.
type RotationStage struct {
	Provider   string `json:"provider"`
	Consumer   string `json:"consumer"`
	Generation uint64 `json:"generation"`
	// Stage is "overlap" (the provider accepts the old and the new
	// credential), "completed" (the old was dropped), or "at once" (no
	// overlap was opened: the old went with the rotation).
	Stage RotationStep `json:"stage"`
	At    time.Time    `json:"at"`
	// Until is the overlap's bound: the old is dropped then at the latest.
	Until time.Time `json:"until,omitzero"`
	// Waiting are the consumer ends that have not applied the new
	// credential yet, during the overlap.
	Waiting []string `json:"waiting,omitempty"`
	// CompletedAt and Reason ("applied", "bound passed") once completed.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
}

// Listing is the report and its nodes apart, for RespondListed: at
// 100,000 nodes the nodes are nearly all of status --json.
func (r StatusReport) Listing() (any, List) {
	// Brief, the table is the bulk: written as its MarshalJSON makes it
	// (List.Raw), the few nodes' list with the rest.
	if t := r.Table; t != nil {
		r.Table = nil // omitted: the list's key
		return r, List{Key: "table", Raw: t.MarshalJSON}
	}
	nodes := r.Nodes
	r.Nodes = nil
	return statusWithoutNodes{StatusReport: r}, List{Key: "nodes", Len: len(nodes), Nil: nodes == nil,
		Item: func(i int) any { return &nodes[i] }}
}

// statusWithoutNodes is a report whose JSON leaves its nodes out: a field
// nearer the top hides an embedded one of the same JSON name, and this
// one, empty, is omitted.
type statusWithoutNodes struct {
	StatusReport
	Nodes []NodeStatus `json:"nodes,omitempty"`
}
