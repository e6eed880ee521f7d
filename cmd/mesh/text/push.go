package text

import (
	"bufio"
	"fmt"
	"io"

	"github.com/meshctl/mesh/wire"
)

// Held names the nodes a push left out because a hand declaration
// holds them (each, or their count), so a held node is never mistaken for
// one the push forgot (rule 13).
func Held(w io.Writer, held []wire.UnsentNode, verb string, each bool) {
	if len(held) > 0 && !each {
		fmt.Fprintf(w, "%s %d node(s) held by a hand declaration (mesh push -v or --json names every one)\n", verb, len(held))
		return
	}
	for _, u := range held {
		fmt.Fprintf(w, "%s %s, held: %s\n", verb, u.Node, u.Reason)
	}
}

// PushExceptions is how many nodes not sent a push names without -v; the
// rest are counted. Ten thousand lines bury the one that matters.
const PushExceptions = 20

// Push prints what a push did: each node sent when few, else a summary and
// the nodes not sent, up to PushExceptions of them.
func Push(out io.Writer, r wire.PushReply, behind, verbose bool) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	// A small push names every node; a large one its summary and the
	// nodes not sent, up to PushExceptions of them.
	each := verbose || len(r.Sent)+len(r.Unsent) <= PushExceptions
	for _, s := range r.Sent {
		note := ""
		if s.Note != "" {
			note = " (" + s.Note + ")"
		}
		if each {
			fmt.Fprintf(w, "sent %s %d resource(s), sequence %d%s\n", s.Node, s.Resources, s.Sequence, note)
		}
	}
	for i, u := range r.Unsent {
		if !each && i == PushExceptions {
			fmt.Fprintf(w, "... and %d more node(s) not sent (mesh push -v or --json names every one)\n", len(r.Unsent)-i)
			break
		}
		fmt.Fprintf(w, "not sent %s: %s\n", u.Node, u.Reason)
	}
	Held(w, r.Held, "left out", each)
	switch {
	case behind && r.Considered == 0:
		fmt.Fprintln(w, "every machine is doing what it was told; nothing to push")
	case r.Considered == 0:
		fmt.Fprintln(w, "no active nodes to push to; enroll one with mesh node enroll NAME")
	default:
		fmt.Fprintf(w, "sent %d of %d node(s)\n", len(r.Sent), r.Considered)
	}
}
