package access

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Enrolment by token (issue 29): an agent that made its keys asks on
// events.EnrolSubject(node), with its token and their public halves; the
// controller checks the token and the keys' signatures, and records the
// token's use, the node (when the token enrols a new one) and its keys in
// one atomic batch. On a closed bus the callout lets a connection carrying
// a token publish there and nowhere else (busauth.EnrolPermissions).

// Enrol records node's own keys from an agent holding a token.
func (h *Service) Enrol(ctx context.Context, r declaration.EnrolRequest) (declaration.EnrolReply, error) {
	if err := core.ValidName("enroll", r.Node); err != nil {
		return declaration.EnrolReply{}, err
	}
	if r.Mesh != h.Mesh {
		return declaration.EnrolReply{}, aggregates.Refuse("enroll", r.Node, aggregates.ErrInvalid, fmt.Sprintf("the token is for mesh %q, not this one (%q)", r.Mesh, h.Mesh))
	}
	if err := r.Check(); err != nil {
		return declaration.EnrolReply{}, aggregates.Refuse("enroll", r.Node, aggregates.ErrInvalid, "the request is not its agent's: "+err.Error())
	}
	keys := events.NodeKeysRecorded{Node: r.Node, Bus: r.Bus, Report: r.Report, Seal: r.Seal, Overlay: r.Overlay}
	var already bool
	seq, _, err := h.network.WithPool(ctx, "enroll", r.Node, wire.NewCommandID(), func(v *projections.View, pool *aggregates.Pool) ([]store.One, error) {
		// The same keys again (the agent's answer was lost, and it asks
		// again): nothing to do, whatever the token says now.
		if k, found, err := v.NodeKeys(r.Node); err != nil || found && k.Bus == r.Bus && k.Report == r.Report && k.Seal == r.Seal && k.Overlay == r.Overlay {
			already = err == nil
			return nil, err
		}
		t, err := checkToken(v, r.Token, r.Node, h.Now())
		if err != nil {
			return nil, aggregates.Refuse("enroll", r.Node, aggregates.ErrInvalid, err.Error())
		}
		keys.Token, keys.Rekey = t.ID, t.Rekey
		items, err := h.tokenItems(v, func(node string, t projections.Token) ([]store.One, error) {
			items, _, err := h.network.EnrollItems(v, pool, []wire.EnrollRequest{{Name: node, Capabilities: t.Capabilities, Labels: t.Labels}}, false)
			return items, err
		}, t, keys)
		if err != nil {
			return nil, aggregates.Refuse("enroll", r.Node, aggregates.ErrInvalid, err.Error())
		}
		return items, nil
	})
	if err != nil {
		return declaration.EnrolReply{}, err
	}
	if !already {
		h.Log.Info("node enrolled with a token, with keys it made", "node", r.Node, "token", keys.Token, "seq", seq)
	}
	return declaration.EnrolReply{Node: r.Node, Seq: seq, Beat: base64.StdEncoding.EncodeToString(h.Keys.NodeBeat(r.Node)), Rekeyed: !already && keys.Rekey}, nil
}

// enrolTimeout bounds one enrolment: a decision and an atomic append.
const enrolTimeout = 30 * time.Second

// ServeEnrol answers agents holding tokens, in the controllers' queue group.
func (h *Service) ServeEnrol(nc *nats.Conn) (*nats.Subscription, error) {
	sub, err := nc.QueueSubscribe(events.EnrolPrefix+".*", "mesh-enrol", func(m *nats.Msg) {
		var r declaration.EnrolRequest
		var reply declaration.EnrolReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			reply.Error = "the enrolment request is not the JSON an agent sends; is the agent as new as the controller?"
		} else if node := m.Subject[len(events.EnrolPrefix)+1:]; node != r.Node {
			// The subject is the one the bus let this connection use.
			reply.Error = fmt.Sprintf("an enrolment of %s asked on %s's subject", r.Node, node)
		} else {
			ctx, cancel := context.WithTimeout(events.WithBy(context.Background(), events.ActorController), enrolTimeout)
			reply, err = h.Enrol(ctx, r)
			cancel()
			if err != nil {
				reply.Error = err.Error()
				var refusal *aggregates.Error
				if !errors.As(err, &refusal) {
					h.Log.Warn("an enrolment failed", "node", r.Node, "err", err)
				}
			}
		}
		b, _ := json.Marshal(reply)
		_ = m.Respond(b)
		if reply.Rekeyed {
			// The keys it held before are not its any more: a connection
			// still open with them is ended now, not at its lifetime's end.
			ctx, cancel := context.WithTimeout(events.WithBy(context.Background(), events.ActorController), enrolTimeout)
			if _, err := h.CutNode(ctx, reply.Node); err != nil {
				h.Log.Warn("re-keyed, but cannot end the connections of its old keys", "node", reply.Node, "err", err)
			}
			cancel()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cannot answer enrolments on %s: %w", events.EnrolPrefix, err)
	}
	return sub, nil
}

// LocalToken is what an agent that runs beside this controller (mesh up's
// own, a test's) enrols with: a token while node has not made its keys,
// "" once it has (its state directory holds them: agent.Enrol).
func (h *Service) LocalToken(ctx context.Context, node string) (string, error) {
	var owned bool
	if err := h.Proj.Read(func(v *projections.View) (err error) { _, owned, err = v.NodeKeys(node); return err }); err != nil || owned {
		return "", err
	}
	id, err := h.Join(ctx, wire.NameRequest{Name: node})
	return id.Token, err
}
