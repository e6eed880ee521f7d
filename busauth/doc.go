// Package busauth is the controller's authority over a closed bus (rule
// 18, a node only hears its own): who each connection is, decided through
// the bus's auth callout, and what each identity may do.
//
// A node proves its identity with the bus key its agent made and enrolled
// with (issue 29: no key of the controller's can speak as it), which the
// read models hold (Directory.NodeBus). A node enrolled before agents made
// their own keys proves it with an nkey derived from the controller key and
// its name (NodeKey) until it is re-keyed. It may read its own
// declarations and publish its own reports, nothing else.
// A module's running instance connects as NODE/MODULE with the key its
// agent hands it, and may do what its manifest says. An operator connects
// with a key of its own, found in the read models, and may call the verbs
// its role allows under that key (operators.go), and never write the
// stream. Anything else is refused at connect.
//
// The callout decides from the mesh's read models, which it reaches only
// through Directory: this package imports neither the verbs nor the read
// models, and the controller (commands) wires the two.
package busauth
