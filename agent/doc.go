// Package agent is the node side of the mesh: it follows its node's
// declarations on the stream, verifies each against the controller key it
// pinned when it joined, applies the files and directories under its root,
// and reports applied, failed or refused under the reports prefix.
//
// It writes nothing of a declaration it refuses; it never writes outside its
// root (an os.Root holds every path, so neither ".." nor a symlink leads out);
// and it remembers what the mesh created, so that a resource no longer
// declared is removed only if the mesh made it, and a file that was there
// before is adopted and left in place.
//
// It runs the programs of modules that run, and keeps each one's recent
// output on the node, bounded, which it gives the operator alone when asked
// (mesh logs).
package agent
