package wire

import (
	"context"
	"sync"
)

// An answer on the bus is sent once, to a client's inbox, and a client
// whose connection dropped in the moment it was sent never hears it: the
// server had no subscription of that client to deliver it to. A
// connection drops more often than a bus dies: a closed bus ends every
// connection at the end of its permissions' lifetime (busauth), a slow
// reader is cut by the server, a cluster moves a client to another server.
// Waiting out --timeout for an answer that went by, five minutes for a
// push, is waiting blind (rule 26). So a controller keeps which requests it
// is working on and which it answered lately, each named by the inbox its
// client named for the pieces of its answer (ChunksToHeader: one a call,
// never reused), and a client whose connection came back asks every
// controller (SubjectRequestState, heard by each, not by one of a queue
// group) which of the two its request is.

// SubjectRequestState asks each controller where a request stands.
const SubjectRequestState = APIPrefix + ".request.state"

// RequestStateRequest names the request by its ChunksToHeader inbox.
type RequestStateRequest struct {
	Request string `json:"request"`
}

// RequestStage is where a request stands with one controller.
type RequestStage string

const (
	// RequestWorking: taken, not yet answered; the answer is still to come.
	RequestWorking RequestStage = "working"
	// RequestAnswered: its answer has been sent.
	RequestAnswered RequestStage = "answered"
	// RequestUnknown: this controller has not taken it, or answered it
	// too long ago to remember (or it waits, unread, behind another
	// request of its verb).
	RequestUnknown RequestStage = "unknown"
)

// RequestState is one controller's answer.
type RequestState struct {
	Stage RequestStage `json:"stage"`
}

// keptAnswered is how many answered requests a controller remembers. A
// client asks within its busGrace (seconds) of a drop; a controller
// answering thousands of requests a second would still remember each for
// longer than that. Each is one inbox name, about 60 bytes.
const keptAnswered = 4096

// Inflight is what a controller holds of the requests it took: those it is
// working on, and the keptAnswered it answered last.
type Inflight struct {
	mu       sync.Mutex
	working  map[string]int
	answered map[string]bool
	order    []string // answered, oldest first, a ring of keptAnswered
	next     int
}

// Begin marks the request id (its ChunksToHeader; "" is none: nothing is
// kept) taken; the func it answers marks it answered, and is to be called
// once its answer, or its refusal, has been handed to the connection.
func (q *Inflight) Begin(id string) (answered func()) {
	if id == "" {
		return func() {}
	}
	q.mu.Lock()
	if q.working == nil {
		q.working, q.answered = map[string]int{}, map[string]bool{}
	}
	q.working[id]++
	q.mu.Unlock()
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.working[id]--; q.working[id] <= 0 {
			delete(q.working, id)
		}
		if q.answered[id] {
			return
		}
		if len(q.order) < keptAnswered {
			q.order = append(q.order, id)
		} else {
			delete(q.answered, q.order[q.next])
			q.order[q.next] = id
			q.next = (q.next + 1) % keptAnswered
		}
		q.answered[id] = true
	}
}

// State answers where the request stands here. It reveals nothing of the
// request but that: an id is a client's inbox, unguessable, and the answer
// carries no content.
func (q *Inflight) State(_ context.Context, r RequestStateRequest) (RequestState, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.working[r.Request] > 0:
		return RequestState{Stage: RequestWorking}, nil
	case q.answered[r.Request]:
		return RequestState{Stage: RequestAnswered}, nil
	}
	return RequestState{Stage: RequestUnknown}, nil
}
