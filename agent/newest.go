package agent

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// opened is one message of the node's declaration subject, verified: d and
// digest when err is nil, otherwise why it is not a declaration the
// controller signed for this node of this mesh.
type opened struct {
	sent   bool   // it is a DeclarationSent at all, which a refusal names
	seq    uint64 // the sequence it claims, when sent
	digest string
	d      declaration.Declaration
	err    error
	// keys are the content keys of d's files that printed secret
	// settings, asked of the controller before d is applied.
	keys map[string]contentKey
	// refusedArtifacts are the artifacts of d the controller would not
	// hand, with why: their resources fail (artifact.go).
	refusedArtifacts map[string]error
}

// open verifies m against the key pinned at enrolment (rule 1).
func (a *Agent) open(m store.Msg) opened {
	_, ev, err := events.Decode(m.Data)
	if err != nil {
		return opened{err: fmt.Errorf("event %d on %s is not a declaration: %w", m.Seq, m.Subject, err)}
	}
	sent, ok := ev.(events.DeclarationSent)
	if !ok {
		return opened{err: fmt.Errorf("event %d on %s is a %s, not a declaration", m.Seq, m.Subject, ev.EventType())}
	}
	sealed := declaration.Sealed{Bytes: sent.Declaration, Signature: sent.Signature, Key: sent.Key, Proof: sent.Proof}
	o := opened{sent: true, seq: sent.Sequence, digest: sealed.Digest()}
	o.d, o.err = declaration.Open(sealed, a.cfg.Join.Key, a.cfg.Join.Mesh, a.cfg.Join.Node)
	return o
}

// toAct is what to act on when last is the newest message on the node's
// declaration subject: last itself when the controller signed it for this
// node, otherwise the newest that it did, asked of the controller (issue
// 29). Anyone may aim a reply subject at the node's subject, and the bus
// stores whatever answers there (docs/security.md, "Who may say what"): an
// agent that refused the newest message and waited for the next push
// stayed behind for as long as the junk stayed newest. The agent cannot
// walk back past it itself: the one read a closed bus grants it answers
// the last message only (store.Newest says why). act false: nothing to act
// on (the controller never sent this node a declaration). An error (no
// controller answers) leaves it to the caller to read and ask again; the
// node is then held at what it applied last, which the log says.
func (a *Agent) toAct(ctx context.Context, last store.Msg) (opened, bool, error) {
	o := a.open(last)
	if o.err == nil {
		return o, true, nil
	}
	newest, found, err := a.st.Newest(ctx, a.cfg.Join.Node)
	if err != nil {
		return opened{}, false, fmt.Errorf("agent: %v; asking the controller for the newest it signed: %w", o.err, err)
	}
	a.cfg.Log.Warn("the newest message on this node's subject is not a declaration the controller signed; acting on the newest that is, as the controller says",
		"event", last.Seq, "why", o.err, "newest_signed", newest.Seq)
	if o.sent {
		// A declaration that does not open (a forger's, another node's)
		// is refused, so the log names the attempt; anything else (an
		// acknowledgement aimed here) was never a declaration to refuse.
		a.handle(ctx, o)
	}
	if !found {
		return opened{}, false, nil
	}
	// Verified all the same: the controller's process answering is not
	// the controller's signature.
	return a.open(newest), true, nil
}
