package events

import "time"

// Liveness (issue 28): whether the mesh still hears from a node. A node's
// agent says it is alive on LivenessSubject every few seconds, a core NATS
// message that is not in the stream: a 10,000-node mesh would otherwise
// write an event every few seconds per node. Only the changes are facts:
// the controller appends NodeUnreachable when a node it heard from falls
// silent for longer than its bound, and NodeReachable when it is heard
// again. Each node's liveness is an aggregate of its own
// (mesh.ev.liveness.<node>.>), not the node's: an append to the node's
// aggregate expects its version, so a liveness change there would make a
// concurrent assignment or push conflict and try again for nothing.

// KindLiveness is the aggregate kind of a node's liveness.
const KindLiveness = "liveness"

// LivenessAggregate is the liveness of node.
func LivenessAggregate(node string) AggregateID { return AggregateID{Kind: KindLiveness, ID: node} }

// LivenessPrefix is where agents say they are alive; not in any stream.
const LivenessPrefix = "mesh.live"

// SubjectsLiveness is every node's liveness subject: what the controller
// hears, and what only a node may publish (its own) on a closed bus.
const SubjectsLiveness = LivenessPrefix + ".*"

// LiveEvery is how often an agent says it is alive. The controller's
// bound on silence is a few of these (liveness.DefaultUnreachableAfter).
const LiveEvery = 5 * time.Second

// LivenessSubject is where node's agent says it is alive.
func LivenessSubject(node string) string { return LivenessPrefix + "." + node }

// NodeUnreachable: the controller has not heard from Node since LastHeard,
// longer than Bound. Its last reports may no longer be true of it.
type NodeUnreachable struct {
	Node      string        `json:"node"`
	LastHeard time.Time     `json:"last_heard"`
	Bound     time.Duration `json:"bound"`
}

func (NodeUnreachable) EventType() string { return "NodeUnreachable" }

// NodeReachable: Node, unreachable before, is heard from again at Heard.
type NodeReachable struct {
	Node  string    `json:"node"`
	Heard time.Time `json:"heard"`
}

func (NodeReachable) EventType() string { return "NodeReachable" }
