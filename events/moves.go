package events

import "slices"

// Moves is what an event type changes beyond its own read model rows: the
// caches and live state the controller keeps outside the read models. The
// controller's caches (the would-send digests behind status, push and the
// automatic rollouts; the live connections the bus lets through) are kept
// valid by asking it, so each type's Right carries it (Rights), and a type
// cannot be added without saying what it moves.
//
// Some choices, for the reader: a rollout's events move nothing
// themselves (a rollout moves nodes by assigning them, which moves
// composition); taking a seat neither (the holder's assignment does); a
// node's own keys move composition (what is sealed to it, its overlay
// key), and its re-key cuts its connections itself (commands.CutNode);
// facts move composition (a capability changes what a node can host).
type Moves uint8

const (
	// MovesNothingElse: the event changes only the read models' rows (a
	// report, a send, a standing, a liveness change, a token's use).
	MovesNothingElse Moves = 0
	// MovesComposition: what some node would be composed to may change,
	// so the composition version moves (projections) and every cache of
	// would-send digests is recomputed.
	MovesComposition Moves = 1 << iota
	// MovesGrants: a live connection may hold more than the log now
	// grants it, so the controller ends it (commands/grants.go).
	MovesGrants
)

// MovesOf is what an event of type typ moves.
func MovesOf(typ string) Moves { return Rights[typ].Moves }

// TypesMoving lists the event types that move m, sorted.
func TypesMoving(m Moves) []string {
	var out []string
	for typ, r := range Rights {
		if r.Moves&m != 0 {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}
