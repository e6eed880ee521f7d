// Package fleet runs many real agents in one process, each with its own
// connection to the bus, its own identity on a closed bus, its own root and
// state: verifying, applying and reporting exactly as mesh agent does. It is
// how the mesh is measured at the size of a fleet (mesh fleet), and what the
// tests that need thousands of machines start. Nothing in it stands in for
// a part of the mesh: take it away and only the measuring is lost.
package fleet
