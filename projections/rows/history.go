package rows

import (
	"encoding/binary"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
)

// A history row is one event of a node's history (a declaration sent to
// it, a report of its, the controller losing and hearing it again), keyed
// by the node and the event's stream sequence (projections/history.go).
// Its value, in the notation of codec.go:
//
//	uvarint(version=2) | kind | time(at) | uvarint(sequence) | digest(digest) |
//	declaration: digest(content digest) str(by) str(operator) varint(resources) bool(builds known) [uvarint(n) n × (str(module) digest(build))]
//	applied:     varint(changed)
//	failed:      uvarint(n) n × (str(path) str(reason))
//	refused:     str(reason) uvarint(highest)
//	drift:       bool(corrected) uvarint(n) n × str(path)
//	interrupted: time(began at)
//	unreachable: time(last heard) uvarint(bound in ns)
//	reachable:   (nothing more)
//
// A declaration whose builds could not be read from its bytes is written
// with builds unknown, so that history says so instead of showing none.
//
// A digest (codec.go's digest) is its 32 bytes when it is a sha256 in hex,
// as every digest the mesh makes is: version 1 kept the 64 characters of
// hex, most of a row of a send, and the history index is a row an event,
// so most of a snapshot of the read models (issue 34: 58 MiB a million
// events, fetched whole by a controller that starts from it).
const historyCodec = 2

// The kinds of a history row.
const (
	HistoryDeclaration byte = 'd'
	HistoryApplied     byte = 'a'
	HistoryFailed      byte = 'f'
	HistoryRefused     byte = 'r'
	HistoryDrift       byte = 'x' // what drifted under the root since an apply
	// HistoryInterrupted: an apply the agent began and did not finish
	// (killed part way); the report of the apply that completed it follows.
	HistoryInterrupted byte = 'i'
	// HistoryUnreachable and HistoryReachable: the controller stopped
	// hearing the node's agent, and heard it again (issue 28). Not the
	// node's word, the controller's; history shows when a node went dark,
	// so its last report is read knowing it.
	HistoryUnreachable byte = 'u'
	HistoryReachable   byte = 'b'
)

// HistoryEntry is one indexed event of a node: what history shows of it.
type HistoryEntry struct {
	Seq      uint64 // stream sequence
	Kind     byte
	At       time.Time
	Sequence uint64 // the declaration's, or the one reported on
	Digest   string
	// A declaration's.
	ContentDigest string
	By            string
	Operator      string // who asked (the envelope's by)
	Resources     int
	Builds        []compose.ModuleBuild // nil: its bytes did not say
	// A report's.
	Changed int
	Failed  []events.ResourceFailure
	Reason  string
	Highest uint64
	// Drift's: the paths changed behind the agent's back, and whether it
	// put them back.
	Paths     []string
	Corrected bool
	// An interrupted apply's: when the agent began it.
	BeganAt time.Time
	// An unreachable's: when it was last heard, and the bound it outlasted.
	LastHeard time.Time
	Bound     time.Duration
}

// EncodeHistory is e's row.
func EncodeHistory(e HistoryEntry) []byte { return AppendHistory(nil, e) }

// AppendHistory appends e's row to dst: the fold writes each into one
// buffer that the batch copies, not a row allocated (and grown) an event.
func AppendHistory(dst []byte, e HistoryEntry) []byte {
	w := rowWriter{b: binary.AppendUvarint(dst, historyCodec)}
	w.b = append(w.b, e.Kind)
	w.time(e.At)
	w.uint(e.Sequence)
	w.digest(e.Digest)
	switch e.Kind {
	case HistoryDeclaration:
		w.digest(e.ContentDigest)
		w.str(e.By)
		w.str(e.Operator)
		w.int(int64(e.Resources))
		w.bool(e.Builds != nil)
		if e.Builds != nil {
			w.uint(uint64(len(e.Builds)))
			for _, m := range e.Builds {
				w.str(m.Module)
				w.digest(m.Build)
			}
		}
	case HistoryApplied:
		w.int(int64(e.Changed))
	case HistoryFailed:
		w.failures(e.Failed)
	case HistoryRefused:
		w.str(e.Reason)
		w.uint(e.Highest)
	case HistoryDrift:
		w.bool(e.Corrected)
		w.uint(uint64(len(e.Paths)))
		for _, p := range e.Paths {
			w.str(p)
		}
	case HistoryInterrupted:
		w.time(e.BeganAt)
	case HistoryUnreachable:
		w.time(e.LastHeard)
		w.uint(uint64(e.Bound))
	}
	return w.b
}

// DecodeHistory reads the row of the event at stream sequence seq.
func DecodeHistory(seq uint64, v []byte) (HistoryEntry, error) {
	r := reader{b: v}
	if r.uvarint() != historyCodec || len(r.b) == 0 {
		return HistoryEntry{}, ErrCorrupt
	}
	e := HistoryEntry{Seq: seq, Kind: r.b[0]}
	r.b = r.b[1:]
	e.At, e.Sequence, e.Digest = r.time(), r.uvarint(), r.digest()
	switch e.Kind {
	case HistoryDeclaration:
		e.ContentDigest, e.By, e.Operator, e.Resources = r.digest(), r.str(), r.str(), int(r.varint())
		if r.bool() {
			n := r.count()
			e.Builds = make([]compose.ModuleBuild, 0, n)
			for range n {
				e.Builds = append(e.Builds, compose.ModuleBuild{Module: r.str(), Build: r.digest()})
			}
		}
	case HistoryApplied:
		e.Changed = int(r.varint())
	case HistoryFailed:
		e.Failed = r.failures()
	case HistoryRefused:
		e.Reason, e.Highest = r.str(), r.uvarint()
	case HistoryDrift:
		e.Corrected = r.bool()
		n := r.count()
		e.Paths = make([]string, 0, n)
		for range n {
			e.Paths = append(e.Paths, r.str())
		}
	case HistoryInterrupted:
		e.BeganAt = r.time()
	case HistoryUnreachable:
		e.LastHeard, e.Bound = r.time(), time.Duration(r.uvarint())
	case HistoryReachable:
	default:
		r.bad = true
	}
	if r.bad || len(r.b) != 0 {
		return HistoryEntry{}, ErrCorrupt
	}
	return e, nil
}
