// Package provenance is rule 19's first half in the fold: is a message its
// rightful writer's? A controller event must carry the MAC of the
// controller's log key (and a declaration sent, the signed bytes its
// record names); a report, the MAC of its node's report key, or, from a
// node that made its own keys, its signature (a standing may also carry
// the controller's MAC, on the operator's word, or that of the module's
// own identity on the node). The MAC is a keyed sha256, about a
// microsecond a message: an ed25519 check of every message would cost a
// rebuild forty times that, and proves nothing more to the controller,
// which can make any of these keys. What it proves to a third party (the
// node's own signature, the controller's on a declaration) audit checks.
//
// It is its own package because it reads the message alone, never a read
// model: one call per message (Of) on the fold's decoding workers, in
// parallel, with the keys and nothing of Pebble or of the fold's state.
// What the read models must say too (the node was enrolled, the report is
// signed by the key it recorded) is the second half, package admit, which
// the fold asks in stream order on its one goroutine.
package provenance
