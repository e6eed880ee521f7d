// Package text is how the command line prints the controller's answers
// for people: the status table, plans and their changes, history and
// audit, the nodes held out of a push, and every string a node wrote,
// escaped (Shown) so that a node cannot steer the operator's terminal.
// The --json answers are wire's types as they are (JSON).
package text
