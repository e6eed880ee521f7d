package aggregates

import "fmt"

// MaxSequence bounds the sequence a node's refusal is believed for: far
// above any real mesh's (a declaration a second for a hundred million
// years), far below where uint64 wraps.
const MaxSequence = 1 << 62

// NumberDeclaration is the sequence of node's next declaration (rule 3:
// numbered at composition, strictly rising): one above the last sent (last,
// 0 for none). A node that refused a declaration as a replay said the
// highest sequence it has applied (refusedHighest, 0 when its last report
// was no such refusal): when that is at or above the next, the log lost
// its tail (an older backup restored, a power loss), and the next is
// numbered above it, so the mesh converges without weakening the node's
// replay check. note says so; a highest no mesh could have sent is not
// believed, and said.
func NumberDeclaration(node string, last, refusedHighest uint64) (seq uint64, note string) {
	seq = last + 1
	switch {
	case refusedHighest < seq:
	case refusedHighest >= MaxSequence:
		// Believing it would number the next near the end of uint64 and
		// wrap to 0, and the node would refuse every push after.
		note = fmt.Sprintf("numbered %d: %s says it applied sequence %d, which no mesh has sent; its state may be damaged", seq, node, refusedHighest)
	default:
		note = fmt.Sprintf("numbered %d, above %d, the highest sequence %s says it applied", refusedHighest+1, refusedHighest, node)
		seq = refusedHighest + 1
	}
	return seq, note
}
