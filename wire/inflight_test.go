package wire

import (
	"context"
	"fmt"
	"testing"
)

// A request is working from Begin until its answer is handed over, then
// answered; the answered are remembered keptAnswered deep, the oldest let
// go first, so a controller's memory of them is bounded.
func TestInflightRemembersTheLastAnswered(t *testing.T) {
	var q Inflight
	stage := func(id string) RequestStage {
		st, _ := q.State(context.Background(), RequestStateRequest{Request: id})
		return st.Stage
	}
	done := q.Begin("first")
	if got := stage("first"); got != RequestWorking {
		t.Fatalf("a request taken: %q, want working", got)
	}
	done()
	if got := stage("first"); got != RequestAnswered {
		t.Fatalf("a request answered: %q, want answered", got)
	}
	for i := range keptAnswered - 1 {
		q.Begin(fmt.Sprint(i))()
	}
	if got := stage("first"); got != RequestAnswered {
		t.Fatalf("the oldest of %d answered: %q, want still answered", keptAnswered, got)
	}
	q.Begin("one more")()
	if got, kept := stage("first"), len(q.answered); got != RequestUnknown || kept != keptAnswered {
		t.Fatalf("one past %d answered: the oldest %q (want unknown), %d kept", keptAnswered, got, kept)
	}
	q.Begin("")()
	if got := stage(""); got != RequestUnknown {
		t.Fatalf("a request without an id: %q, want nothing kept", got)
	}
}
