// Package logbook keeps the recent output of the programs an agent
// supervises, on the node: each module's newest lines within a bound, in
// memory (what `mesh logs` is answered from) and on disk under the agent's
// state, so a restarted agent serves them again. It knows nothing of the
// bus or of declarations: the supervisor writes lines into it and the
// agent's logs endpoint reads them out, so it is a package of its own.
package logbook
