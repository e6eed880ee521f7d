// Package moved remembers which nodes the last events that moved
// composition named, so that what moved between two composition versions
// is known without reading the log: the first status after a change at
// 100,000 nodes patches the nodes a change touched (commands/world) rather
// than reading and indexing every node again (issue 34). The live fold
// adds each commit's moves; a view asks for those between two versions.
package moved

import "github.com/meshctl/mesh/events"

// Max is how many moves are remembered: past a thousand nodes touched a
// patch costs about what a whole read does (commands/world).
const Max = 1000

// Move is one event that moved composition: its sequence, and the node it
// moved alone ("" when it may move any node: a module registered, the
// network, a seat, a rotation, an artifact, a secret forgotten).
type Move struct {
	Seq  uint64
	Node string
}

// Log is the moves after known, up to at: every event that moved
// composition in (known, at] is in seen. Not safe for concurrent use: the
// fold's memory lock guards it.
type Log struct {
	known, at uint64
	seen      []Move
}

// New is a log of no moves, complete from after known on; the fold that
// adds to it starts at checkpoint. known is the last event before it
// that moved composition (the read models' composition version), since
// none in (known, checkpoint] did, so a world composed at known of the
// same rows may be patched: from the checkpoint alone, a world composed
// before the fold started again (a bus restart) could never be, and the
// first status after the next change read and composed every node again
// (1.1 CPU s at 100,000 nodes). A known past the checkpoint says nothing
// before the fold is known (after a rebuild: projections' share).
func New(known, checkpoint uint64) *Log { return &Log{known: known, at: checkpoint} }

// Add records a commit's moves, the commit's checkpoint at. The oldest
// past Max are forgotten, and with them what is known before them.
func (l *Log) Add(moves []Move, at uint64) {
	l.seen = append(l.seen, moves...)
	if over := len(l.seen) - Max; over > 0 {
		l.known = l.seen[over-1].Seq
		l.seen = append(l.seen[:0], l.seen[over:]...)
	}
	l.at = at
}

// Between names the nodes the moves after version from, up to version to,
// touched; false when the log cannot say (from before what it knows, to
// after what it holds), when one move was no one node's, or when none
// is in the span (then the versions disagree with the log).
func (l *Log) Between(from, to uint64) (map[string]bool, bool) {
	if from < l.known || to > l.at || to <= from {
		return nil, false
	}
	nodes := map[string]bool{}
	for _, m := range l.seen {
		if m.Seq <= from || m.Seq > to {
			continue
		}
		if m.Node == "" {
			return nil, false
		}
		nodes[m.Node] = true
	}
	return nodes, len(nodes) > 0
}

// oneNode are the event types that move composition through one node
// alone, the node their aggregate names (events.Rights' Name): every
// other type that moves composition may move any node. By each type's own
// name, so that a renamed type cannot leave a literal here matching
// nothing (every move of it would then read everything again, unseen).
var oneNode = map[string]bool{}

func init() {
	for _, ev := range []events.Event{events.NodeEnrolled{}, events.NodeRetired{}, events.NodeChanged{}, events.ModuleAssigned{},
		events.ModuleUnassigned{}, events.NodeKeysRecorded{}, events.NodeFactsReported{}} {
		oneNode[ev.EventType()] = true
	}
}

// OneNode says whether events of type typ move composition through the
// node they name alone.
func OneNode(typ string) bool { return oneNode[typ] }
