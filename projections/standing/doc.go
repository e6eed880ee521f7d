// Package standing is the rule a standing is held to before the fold takes
// it as a fact (rule 23, issue 29): a standing says that a provider on a
// machine fails a consumer of it, and it holds the rollouts of both
// modules, so it is a fact only when it can be true. The provider is
// assigned to the machine that reports it, and the consumer is assigned
// somewhere and resolved to that provider, as composition resolves it: it
// consumes a requirement the provider's build provides, and no other
// hostable provider of that requirement is there to choose. Anything else
// is foreign (rule 19), so a node cannot hold the rollout of a module it
// has nothing to do with.
//
// It is its own package because it is one decision with a narrow
// interface to the read models: it reads placements (Placements: node
// rows, assignments, the catalogue's builds and manifests, detected
// capabilities, whether a triple is failing) and answers why a standing
// is foreign, or nil. It writes nothing and knows no key, so the fold
// (which asks it at the standing's place in the log, from its batch) and
// a view (which asks it of the operator's report before it is appended)
// decide the same, and a replay decides as the first fold did.
package standing
