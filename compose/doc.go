// Package compose turns what the read models say about the mesh into what one
// node should be: its declaration, as canonical bytes with a sha256 digest.
// It is a pure function of its input: the same read models give the same
// bytes, whatever order the events behind them arrived in, so "would this
// node be sent something new?" is a comparison of digests, never a guess.
//
// A node that cannot be composed (a requirement nobody provides, or more
// than one provider and no way to choose; a template that fails; two modules
// declaring one path) is answered with its reasons and no declaration: the
// fault stays with that node. A module needing a capability the node lacks is
// left out with the reason, and the rest of the node composes.
//
// It imports only the standard library and manifest: no bus, no store.
package compose
