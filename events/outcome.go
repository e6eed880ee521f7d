package events

// Outcome is what a node's agent said of a declaration it was sent: the one
// definition, used by every package that reads reports.
type Outcome string

const (
	OutcomeApplied Outcome = "applied" // it holds exactly that declaration
	OutcomeFailed  Outcome = "failed"  // it tried, and some resources failed
	OutcomeRefused Outcome = "refused" // it would not apply it at all
)

// Outcomes are every outcome, in the order status lists them.
var Outcomes = []Outcome{OutcomeApplied, OutcomeFailed, OutcomeRefused}

// OutcomeOf is the outcome a report event says, if it is one of the three.
func OutcomeOf(ev Event) (Outcome, bool) {
	switch ev.(type) {
	case DeclarationApplied:
		return OutcomeApplied, true
	case DeclarationFailed:
		return OutcomeFailed, true
	case DeclarationRefused:
		return OutcomeRefused, true
	}
	return "", false
}
