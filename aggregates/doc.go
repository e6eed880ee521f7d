// Package aggregates holds the mesh's consistency boundaries. Each one is
// rebuilt from its own events (Apply, the only mutator) and decides on a
// command (Decide, pure, with the clock passed in): it answers the new events,
// none when the command is already satisfied, or a refusal a person can act on.
//
// Aggregates know nothing of NATS or Pebble (a test holds that): whether two
// controllers raced is the store's business, what a node may do is ours.
package aggregates
