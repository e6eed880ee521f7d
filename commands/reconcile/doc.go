// Package reconcile is the controller sending the latest declaration to
// behind nodes by itself (mesh up --reconcile, rule 27): it wakes when the
// read models fold an event that can make a node behind (a composition
// change, a rollout's step, a node heard again, a drift report), judges
// the nodes it names, and sends those due through package push, at most
// a bounded number each window, recorded as sent by the reconciler. It
// leaves to people every node held by a hand declaration, inside a
// rollout, of a module whose reconcile is never, or that failed or
// refused what it would be sent again.
package reconcile
