package wire

import (
	"time"

	"github.com/meshctl/mesh/events"
)

// The read models' rows that answers carry whole. They live here, not in
// projections, so that a client can decode them without linking Pebble;
// projections names each by an alias and folds into them unchanged.

// StatusReply is where folding stands against the stream: what
// `projections status` answers (projections.Status is this type).
type StatusReply struct {
	Generation string `json:"generation"`
	Checkpoint uint64 `json:"checkpoint"`
	StreamLast uint64 `json:"stream_last"`
	Lag        uint64 `json:"lag"`
	Failure    string `json:"failure,omitempty"`
}

// ForeignMessage is one foreign message's row.
type ForeignMessage struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Type    string    `json:"type,omitempty"`   // the type it claims, if it reads as an event
	Writer  string    `json:"writer,omitempty"` // the signer it names, if any
	Reason  string    `json:"reason"`
	Stored  time.Time `json:"stored"`
	// Nodes are the nodes it touches: its subject's, and any named inside.
	Nodes []string `json:"nodes,omitempty"`
	// Acked is the stream sequence of the acknowledgement, 0 while open.
	Acked uint64 `json:"acked,omitempty"`
}

// AddressRow is one address not free: held by Node, or given back at
// Released (Node "").
type AddressRow struct {
	Address  string    `json:"address"`
	Node     string    `json:"node,omitempty"`
	Fixed    bool      `json:"fixed,omitempty"`
	Released time.Time `json:"released,omitzero"`
}

// Token is an enrolment token as the log knows it: never its secret.
type Token struct {
	events.TokenCreated
	Used      []string  `json:"used"` // the nodes that enrolled with it, in order
	Revoked   bool      `json:"revoked"`
	CreatedAt time.Time `json:"created_at"`
	Version   uint64    `json:"version"`
}

// Left is how many uses the token has at now ("" reasons below say why none).
func (t Token) Left(now time.Time) (int, string) {
	switch {
	case t.Revoked:
		return 0, "it was revoked"
	case !now.Before(t.Expires):
		return 0, "it expired at " + t.Expires.UTC().Format(time.RFC3339)
	case len(t.Used) >= t.Uses:
		return 0, "its uses are spent"
	}
	return t.Uses - len(t.Used), ""
}

// Rollout states.
const (
	RolloutRunning  = "running"
	RolloutPaused   = "paused"
	RolloutHalted   = "halted"
	RolloutAborted  = "aborted"
	RolloutFinished = "finished"
)

// Rollout is one rollout as its steps left it. Version is the sequence of
// its aggregate's last event: the expectation of its next step.
type Rollout struct {
	events.RolloutStarted
	State string `json:"state"`
	// Wave is the wave under way (its index), -1 before the first.
	Wave     int       `json:"wave"`
	WaveAt   time.Time `json:"wave_at,omitzero"` // when the wave under way started
	Node     string    `json:"node,omitempty"`   // the node that halted it
	Why      string    `json:"why,omitempty"`
	Reverted bool      `json:"reverted,omitempty"`
	Started  time.Time `json:"started"`
	Changed  time.Time `json:"changed"`
	Version  uint64    `json:"version"`
}

// Open says whether the rollout may still move (running or paused).
func (r Rollout) Open() bool { return r.State == RolloutRunning || r.State == RolloutPaused }

// Runtime states: what a node's agent last said of a module's program.
const (
	RuntimeRunning      = "running"
	RuntimeExited       = "exited" // down: the agent starts it again after a backoff
	RuntimeCrashLooping = "crash-looping"
)

// Health is what a program's health check last said (issue 31): "" for a
// program without a check, whose health is that it runs.
type Health string

const (
	// HealthStarting: it has a check, and since it last started the
	// check has not yet passed or failed enough times in a row to say.
	HealthStarting Health = "starting"
	HealthHealthy  Health = "healthy"
	// HealthUnhealthy: its check failed enough times in a row; why is in
	// HealthDetail. A rollout's gate halts on it (rule 23).
	HealthUnhealthy Health = "unhealthy"
)

// Runtime is one module's program on one node, as its agent last reported
// it. A program the agent stopped (its module left the node) has no row.
type Runtime struct {
	Node   string    `json:"node"`
	Module string    `json:"module"`
	State  string    `json:"state"`
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
	PID    int       `json:"pid,omitempty"`
	Seq    uint64    `json:"seq"`
	// Health, since when (HealthSince) and why (HealthDetail, when
	// unhealthy), for a program with a check; omitted for one without.
	Health Health `json:"health,omitempty"`
	// StartedUnder is the sequence of the declaration the process started
	// under: a rollout's gate tells by it the process of the build from
	// its predecessor, whatever the agents' clocks or a report's delay.
	StartedUnder uint64    `json:"started_under,omitempty"`
	HealthSince  time.Time `json:"health_since,omitzero"`
	HealthDetail string    `json:"health_detail,omitempty"`
	// Digest is the artifact the running process is (issue 32), as its
	// agent said when it started it; omitted for a program that is none.
	Digest string `json:"digest,omitempty"`
}

// Well says whether the program is as status wants it: running, and not
// unhealthy (a check still starting is not a fault yet).
func (r Runtime) Well() bool { return r.State == RuntimeRunning && r.Health != HealthUnhealthy }

// Seat is one seat's row (issue 18): its holder, a handover under way, and
// Version, the sequence of its aggregate's last event (the expectation of
// its next).
type Seat struct {
	Seat   string    `json:"seat"`
	Node   string    `json:"node,omitempty"` // the holder; "" when free
	Module string    `json:"module,omitempty"`
	Since  time.Time `json:"since"`
	// HandoverTo is where a handover under way moves it; HandoverSeq the
	// stream sequence it started at (what the holder is sent after it is
	// what it must apply); Force: without waiting for the holder.
	HandoverTo  string    `json:"handover_to,omitempty"`
	HandoverSeq uint64    `json:"handover_seq,omitempty"`
	HandoverAt  time.Time `json:"handover_at,omitzero"`
	Force       bool      `json:"force,omitempty"`
	// TakenSeq is where the holder took it by a handover: until the holder
	// is sent a declaration after it, the handover's last step (sending
	// the holder and its consumers) is still to be taken.
	TakenSeq uint64 `json:"taken_seq,omitempty"`
	// Why is why it was last let go, when it is free.
	Why     string `json:"why,omitempty"`
	Version uint64 `json:"version"`
}

// Sent is one declaration sent to a node: the node row's last send, and
// what node list, node show and plan print of it.
type Sent struct {
	Sequence      uint64 `json:"sequence"`
	Digest        string `json:"digest"`
	ContentDigest string `json:"content_digest"`
	By            string `json:"by"`
	// Operator is who asked for the send (the envelope's by, issue 33):
	// an operator's name, or the actor that sent by itself.
	Operator  string    `json:"operator,omitempty"`
	Resources int       `json:"resources"`
	At        time.Time `json:"at"`
	// StreamSeq is where the send is in the log: the row's, for the
	// commands that read the declaration back or wait past it. The views
	// leave it zero, so it is not printed: their --json output (golden
	// files) never carried it, and a row's is never 0.
	StreamSeq uint64 `json:"seq,omitempty"`
}

// Report is one report a node sent back.
type Report struct {
	Outcome   events.Outcome           `json:"outcome"`
	Sequence  uint64                   `json:"sequence"`
	Digest    string                   `json:"digest"`
	Reason    string                   `json:"reason,omitempty"`
	Failed    []events.ResourceFailure `json:"failed,omitempty"`
	Highest   uint64                   `json:"highest,omitempty"`
	At        time.Time                `json:"at"`
	StreamSeq uint64                   `json:"seq"`
	// FailingSince is when the node began failing (or refusing) the same
	// way without an applied report between: push --behind's "for over six
	// hours" (docs/status.md).
	FailingSince time.Time `json:"failing_since,omitzero"`
}
