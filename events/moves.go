package events

import "slices"

// Moves is what an event type changes beyond its own read model rows: the
// caches and live state the controller keeps outside the read models. The
// controller's caches (the would-send digests behind status, push and the
// automatic rollouts; the live connections the bus lets through) are kept
// valid by asking this table, so an event type missing from it would leave
// one of them stale without a word: TestEveryEventSaysWhatItMoves fails
// for any type of Rights not listed here.
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

// Moved is the table: every event type, and what it moves.
var Moved = map[string]Moves{
	"NodeEnrolled":          MovesComposition,
	"NodeRetired":           MovesComposition | MovesGrants,
	"NodeChanged":           MovesComposition,
	"RolloutStarted":        MovesNothingElse, // a rollout moves nodes by assigning them, which moves composition
	"RolloutStep":           MovesNothingElse,
	"NetworkSet":            MovesComposition,
	"AddressesAllotted":     MovesComposition,
	"AddressesReleased":     MovesComposition,
	"SeatTaken":             MovesNothingElse, // the holder's assignment moves composition; taking is the queue's
	"SeatHandoverStarted":   MovesComposition | MovesGrants,
	"SeatHandedOver":        MovesComposition | MovesGrants,
	"SeatReleased":          MovesComposition | MovesGrants,
	"ModuleAssigned":        MovesComposition,
	"ModuleUnassigned":      MovesComposition | MovesGrants,
	"DeclarationSent":       MovesNothingElse,
	"ModuleRegistered":      MovesComposition,
	"CredentialRotated":     MovesComposition,
	"SecretForgotten":       MovesComposition,
	"ControllerKeyRecorded": MovesNothingElse,
	"ForeignAcknowledged":   MovesNothingElse,
	"NodeFlooded":           MovesNothingElse,
	"NodeUnreachable":       MovesNothingElse,
	"NodeReachable":         MovesNothingElse,
	"TokenCreated":          MovesNothingElse,
	"TokenUsed":             MovesNothingElse,
	"TokenRevoked":          MovesNothingElse,
	// A node's own keys change what is sealed to it (its seal and overlay
	// keys); its enrolment's re-key cuts its connections itself
	// (commands.CutNode), once the event is folded.
	"NodeKeysRecorded": MovesComposition,

	"DeclarationApplied":  MovesNothingElse,
	"DeclarationFailed":   MovesNothingElse,
	"DeclarationRefused":  MovesNothingElse,
	"ReportKeyRecorded":   MovesNothingElse,
	"ProviderFailing":     MovesNothingElse,
	"ProviderRecovered":   MovesNothingElse,
	"RuntimeStarted":      MovesNothingElse,
	"RuntimeExited":       MovesNothingElse,
	"RuntimeCrashLooping": MovesNothingElse,
	"RuntimeSteady":       MovesNothingElse,
	"RuntimeStopped":      MovesNothingElse,
	"DriftFound":          MovesNothingElse,
	// Facts change which capabilities a node has, so what it can host.
	"NodeFactsReported": MovesComposition,
	"ApplyInterrupted":  MovesNothingElse,
}

// MovesOf is what an event of type typ moves.
func MovesOf(typ string) Moves { return Moved[typ] }

// TypesMoving lists the event types that move m, sorted.
func TypesMoving(m Moves) []string {
	var out []string
	for typ, moves := range Moved {
		if moves&m != 0 {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}
