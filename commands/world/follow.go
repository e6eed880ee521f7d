package world

import (
	"context"
	"sync"
	"time"

	"github.com/meshctl/mesh/events"
)

// A patch (patch.go) must know every event that moved composition between
// the kept world's version and the new one. Reading that span of the log
// when asked cost 0.1-0.4 s at 100,000 nodes whatever its length: a
// consumer of the twenty subjects of those events counts what they hold
// across every node's subject before it delivers one. So the composer
// follows those subjects from the first world it indexes whole on, one
// consumer for its life, and remembers which node each message named.

// LogReader follows the log: it calls fn with the sequence and subject of
// each message on one of subjects, from sequence from on, in order, until
// ctx ends or fn fails. This package may not read the log itself (the
// layout's rule keeps it to the read models): the caller that may hands
// it one (ReadsLogWith).
type LogReader func(ctx context.Context, from uint64, subjects []string, fn func(seq uint64, subject string) error) error

// ReadsLogWith has the composer learn from read what moved between two
// composition versions, and patch the world it keeps rather than read
// and index everything again. Without one it reads everything again.
func (h *Composer) ReadsLogWith(read LogReader) {
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	h.moves.read = read
}

// nodeMoves are the event types that move composition through one node
// alone, by the node their subject names: a controller event's aggregate
// id (a node's, or its keys', whose id is the node's name: rule 19 holds
// the name inside to the subject's), a report's node.
var nodeMoves = map[string]bool{
	"NodeEnrolled": true, "NodeRetired": true, "NodeChanged": true, "ModuleAssigned": true,
	"ModuleUnassigned": true, "NodeKeysRecorded": true, "NodeFactsReported": true,
}

// compositionSubjects are the subjects of every event type that moves
// composition (events.MovesComposition): the only messages between two
// composition versions a patch must know.
var compositionSubjects = func() []string {
	var out []string
	for _, typ := range events.TypesMoving(events.MovesComposition) {
		if r := events.Rights[typ]; r.Writer == events.ByNode {
			out = append(out, events.ReportPrefix+".*."+typ)
		} else {
			out = append(out, events.EventPrefix+"."+r.Kind+".*."+typ)
		}
	}
	return out
}()

const (
	// Past maxTouched nodes a patch is not worth it: a node is five
	// reads of the read models, each near the cost of a hundred rows of
	// a full read. It bounds what the follower remembers too.
	maxTouched = 1000
	// touchWait bounds waiting for the follower to reach a version: a
	// first follow of a long span, or a log that does not answer, costs a
	// full read, not a status.
	touchWait = 2 * time.Second
	// followIdle ends a follower no patch asked anything of for so long
	// (a test's composer): the next change is read whole, and starts
	// another.
	followIdle = 10 * time.Minute
)

// moves is what the follower learnt: each message from sequence from on,
// up to upTo, with the node it named ("" for an event that is no one
// node's alone).
type moves struct {
	mu      sync.Mutex
	read    LogReader
	running bool
	from    uint64
	upTo    uint64
	seen    []moved
	// overflow: more than maxTouched messages since from, forgotten; no
	// patch from before upTo is possible.
	overflow bool
	arrived  chan struct{} // closed at each message, and made anew
	idle     *time.Timer
}

type moved struct {
	seq  uint64
	node string
}

// touched names the nodes the composition-moving events after version
// from, up to to, touched, or answers false when one of them is not a
// node's alone, there are too many, or the follower cannot say (not
// following from there, or not there within touchWait).
func (h *Composer) touched(from, to uint64) (map[string]bool, bool) {
	m := &h.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil || to <= from {
		return nil, false
	}
	if !m.running {
		// Started here it cannot say what came before (and a follower
		// started from a version long past would read all since): this
		// status reads everything, and the next patches.
		m.start(to + 1)
		return nil, false
	}
	m.idle.Reset(followIdle)
	if m.from > from+1 {
		return nil, false // it followed from later than from: the span is unknown
	}
	timer := time.NewTimer(touchWait)
	defer timer.Stop()
	expired := false
	for m.upTo < to && m.running && !expired {
		arrived := m.arrived
		m.mu.Unlock()
		select {
		case <-arrived:
		case <-timer.C:
			expired = true
		}
		m.mu.Lock()
	}
	if m.upTo < to || m.from > from+1 {
		return nil, false // not there in time, the follower ended, or it forgot the span
	}
	nodes := map[string]bool{}
	keep := m.seen[:0]
	for _, mv := range m.seen {
		if mv.seq <= from {
			continue // older than any world kept from now on
		}
		keep = append(keep, mv)
		if mv.seq > to {
			continue
		}
		if mv.node == "" {
			nodes = nil
		} else if nodes != nil {
			nodes[mv.node] = true
		}
	}
	m.seen = keep
	return nodes, len(nodes) > 0 && len(nodes) <= maxTouched
}

// followFrom starts following the log from sequence from, unless it is
// followed already: called when a world is indexed whole, so that the
// first patch after it finds the follower there (a follower's first
// message took 0.1 s and more at 100,000 nodes, longer over a long span).
func (h *Composer) followFrom(from uint64) {
	m := &h.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read != nil && !m.running {
		m.start(from)
	}
}

// start follows the log from sequence from, in a goroutine of its own,
// until it fails or no patch asked anything for followIdle. Called with
// m.mu held.
func (m *moves) start(from uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	m.running, m.from, m.upTo, m.seen, m.overflow, m.arrived = true, from, from-1, nil, false, make(chan struct{})
	m.idle = time.AfterFunc(followIdle, cancel)
	read := m.read
	go func() {
		defer cancel()
		err := read(ctx, from, compositionSubjects, func(seq uint64, subject string) error {
			mv := moved{seq: seq}
			// A message on such a subject the fold set aside as foreign
			// names its node all the same: reading a node that did not
			// move only costs its reads.
			if s, err := events.ParseSubject(subject); err == nil && nodeMoves[s.Type] {
				mv.node = s.Aggregate.ID
				if s.Writer == events.ByNode {
					mv.node = s.Node
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.seen) >= maxTouched {
				// Forgotten: a patch from before here reads everything.
				m.seen, m.overflow, m.from = m.seen[:0], true, seq
			}
			m.seen = append(m.seen, mv)
			m.upTo = seq
			close(m.arrived)
			m.arrived = make(chan struct{})
			return nil
		})
		_ = err // ended: the next patch starts another follower
		m.mu.Lock()
		m.running = false
		close(m.arrived)
		m.arrived = make(chan struct{})
		m.mu.Unlock()
	}()
}
