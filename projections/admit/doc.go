// Package admit is rule 19's second half in the fold: does what the read
// models hold allow the event? The node it names was enrolled (and, for a
// change, is not retired); a report is signed by the report key its node
// recorded, or by the keys the node made itself; a declaration sent rises
// above the last; a token used was created; and a standing can be true
// (rule 23, issue 29): its provider is assigned to the machine that says
// it, toward a consumer resolved to that provider as composition resolves
// it, so a node cannot hold the rollout of a module it has nothing to do
// with. Anything else is foreign, set aside and never folded.
//
// It is its own package because it is one decision with a narrow
// interface to the read models: it reads rows through Models (node rows,
// report keys, a node's own keys, tokens) and Placements (assignments, the
// catalogue's builds and manifests, detected capabilities, whether a
// triple is failing), and answers why an event is foreign, or nil. It
// writes nothing and knows no key, so the fold (which asks it at each
// event's place in the log, on its one goroutine, from its batch) and a
// view (which asks the standing rule of the operator's report before it is
// appended) decide the same, and a replay decides as the first fold did.
// What the message alone says (its MAC, its signer) provenance judged
// before, on the decoding workers.
package admit
