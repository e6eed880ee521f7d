package commands

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Request timeouts inside the controller: a verb that cannot finish in this
// time answers an error rather than leaving the client to guess.
const (
	verbTimeout    = 30 * time.Second
	pushTimeout    = 5 * time.Minute
	rebuildTimeout = 30 * time.Minute
)

// Serve registers the mesh-controller micro service with one endpoint per verb.
// Endpoints share the default queue group, so several controllers on one bus
// split the requests; optimistic concurrency on the stream keeps them honest.
func Serve(nc *nats.Conn, h *Services) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name: wire.ServiceName, Version: wire.ServiceVersion,
		Description: "the mesh controller: nodes, modules, assignments, plans and signed pushes",
	})
	if err != nil {
		return nil, err
	}
	endpoints := []struct {
		name, subject string
		handler       micro.Handler
	}{
		{"node-enroll", wire.SubjectNodeEnroll, endpoint(nc, h, wire.SubjectNodeEnroll, h.Nodes.Enroll, verbTimeout)},
		{"node-retire", wire.SubjectNodeRetire, endpoint(nc, h, wire.SubjectNodeRetire, h.Nodes.Retire, verbTimeout)},
		{"node-change", wire.SubjectNodeChange, endpoint(nc, h, wire.SubjectNodeChange, h.Nodes.ChangeNode, verbTimeout)},
		{"node-list", wire.SubjectNodeList, endpoint(nc, h, wire.SubjectNodeList, h.Nodes.ListNodes, verbTimeout)},
		{"node-show", wire.SubjectNodeShow, endpoint(nc, h, wire.SubjectNodeShow, h.Status.ShowNode, verbTimeout)},
		{"node-assign", wire.SubjectNodeAssign, endpoint(nc, h, wire.SubjectNodeAssign, h.Nodes.Assign, verbTimeout)},
		{"node-unassign", wire.SubjectNodeUnassign, endpoint(nc, h, wire.SubjectNodeUnassign, h.Nodes.Unassign, verbTimeout)},
		{"node-plan", wire.SubjectNodePlan, endpoint(nc, h, wire.SubjectNodePlan, h.Push.Plan, verbTimeout)},
		{"node-enroll-batch", wire.SubjectNodeEnrollBatch, endpoint(nc, h, wire.SubjectNodeEnrollBatch, h.Nodes.EnrollBatch, verbTimeout)},
		{"node-assign-batch", wire.SubjectNodeAssignBatch, endpoint(nc, h, wire.SubjectNodeAssignBatch, h.Nodes.AssignBatch, verbTimeout)},
		{"node-select", wire.SubjectNodeSelect, endpoint(nc, h, wire.SubjectNodeSelect, h.Push.SelectNodes, verbTimeout)},
		{"node-join", wire.SubjectNodeJoin, endpoint(nc, h, wire.SubjectNodeJoin, h.Access.Join, verbTimeout)},
		{"node-rekey", wire.SubjectNodeRekey, endpoint(nc, h, wire.SubjectNodeRekey, h.Access.Rekey, verbTimeout)},
		{"token-create", wire.SubjectTokenCreate, endpoint(nc, h, wire.SubjectTokenCreate, h.Access.CreateToken, verbTimeout)},
		{"token-list", wire.SubjectTokenList, endpoint(nc, h, wire.SubjectTokenList, h.Access.ListTokens, verbTimeout)},
		{"token-revoke", wire.SubjectTokenRevoke, endpoint(nc, h, wire.SubjectTokenRevoke, h.Access.RevokeToken, verbTimeout)},
		{"push", wire.SubjectPush, endpoint(nc, h, wire.SubjectPush, h.Push.Push, pushTimeout)},
		{"rollout-start", wire.SubjectRolloutStart, endpoint(nc, h, wire.SubjectRolloutStart, h.Rollouts.StartRollout, pushTimeout)},
		{"rollout-control", wire.SubjectRolloutControl, endpoint(nc, h, wire.SubjectRolloutControl, h.Rollouts.ControlRollout, verbTimeout)},
		{"rollout-list", wire.SubjectRolloutList, endpoint(nc, h, wire.SubjectRolloutList, h.Rollouts.ListRollouts, verbTimeout)},
		{"rollout-show", wire.SubjectRolloutShow, endpoint(nc, h, wire.SubjectRolloutShow, h.Rollouts.ShowRollout, verbTimeout)},
		{"rollout-plan", wire.SubjectRolloutPlan, endpoint(nc, h, wire.SubjectRolloutPlan, h.Rollouts.PlanRollout, pushTimeout)},
		{"network-set", wire.SubjectNetworkSet, endpoint(nc, h, wire.SubjectNetworkSet, h.Network.SetNetwork, verbTimeout)},
		{"network-show", wire.SubjectNetworkShow, endpoint(nc, h, wire.SubjectNetworkShow, h.Network.ShowNetwork, verbTimeout)},
		{"network-address", wire.SubjectNetworkAddress, endpoint(nc, h, wire.SubjectNetworkAddress, h.Network.FixAddress, verbTimeout)},
		{"seat-list", wire.SubjectSeatList, endpoint(nc, h, wire.SubjectSeatList, h.Seats.ListSeats, verbTimeout)},
		{"seat-show", wire.SubjectSeatShow, endpoint(nc, h, wire.SubjectSeatShow, h.Seats.ShowSeat, verbTimeout)},
		{"seat-handover", wire.SubjectSeatHandover, endpoint(nc, h, wire.SubjectSeatHandover, h.Seats.HandoverSeat, pushTimeout)},
		{"artifact-put", wire.SubjectArtifactPut, endpoint(nc, h, wire.SubjectArtifactPut, h.Artifacts.PutArtifact, pushTimeout)},
		{"artifact-list", wire.SubjectArtifactList, endpoint(nc, h, wire.SubjectArtifactList, h.Artifacts.ListArtifacts, verbTimeout)},
		{"artifact-show", wire.SubjectArtifactShow, endpoint(nc, h, wire.SubjectArtifactShow, h.Artifacts.ShowArtifact, verbTimeout)},
		{"artifact-rm", wire.SubjectArtifactRemove, endpoint(nc, h, wire.SubjectArtifactRemove, h.Artifacts.RemoveArtifact, verbTimeout)},
		{"push-plan", wire.SubjectPushPlan, endpoint(nc, h, wire.SubjectPushPlan, h.Push.PushPlan, pushTimeout)},
		{"rotate", wire.SubjectRotate, endpoint(nc, h, wire.SubjectRotate, h.Credentials.Rotate, verbTimeout)},
		{"secret-forget", wire.SubjectSecretForget, endpoint(nc, h, wire.SubjectSecretForget, h.Credentials.ForgetSecret, verbTimeout)},
		{"declare", wire.SubjectDeclare, endpoint(nc, h, wire.SubjectDeclare, h.Push.Declare, verbTimeout)},
		{"status", wire.SubjectStatus, endpoint(nc, h, wire.SubjectStatus, h.Status.Status, verbTimeout)},
		{"report", wire.SubjectReport, endpoint(nc, h, wire.SubjectReport, h.Status.Report, verbTimeout)},
		{"history", wire.SubjectHistory, endpoint(nc, h, wire.SubjectHistory, h.History.History, verbTimeout)},
		{"audit", wire.SubjectAudit, endpoint(nc, h, wire.SubjectAudit, h.History.Audit, rebuildTimeout)},
		{"foreign-list", wire.SubjectForeignList, endpoint(nc, h, wire.SubjectForeignList, h.Access.ListForeign, verbTimeout)},
		{"foreign-ack", wire.SubjectForeignAck, endpoint(nc, h, wire.SubjectForeignAck, h.Access.AckForeign, verbTimeout)},
		{"report-judge", wire.SubjectReportJudge, endpoint(nc, h, wire.SubjectReportJudge, h.Status.JudgeReport, verbTimeout)},
		{"module-register", wire.SubjectModuleRegister, endpoint(nc, h, wire.SubjectModuleRegister, h.Modules.RegisterModule, verbTimeout)},
		{"module-list", wire.SubjectModuleList, endpoint(nc, h, wire.SubjectModuleList, h.Modules.ListModules, verbTimeout)},
		{"module-show", wire.SubjectModuleShow, endpoint(nc, h, wire.SubjectModuleShow, h.Modules.ShowModule, verbTimeout)},
		{"projections-status", wire.SubjectProjectionsStatus, endpoint(nc, h, wire.SubjectProjectionsStatus, h.Status.ProjectionsStatus, verbTimeout)},
		{"projections-rebuild", wire.SubjectProjectionsRebuild, endpoint(nc, h, wire.SubjectProjectionsRebuild, h.Status.RebuildProjections, rebuildTimeout)},
		{"projections-verify", wire.SubjectProjectionsVerify, endpoint(nc, h, wire.SubjectProjectionsVerify, h.Status.VerifyProjections, rebuildTimeout)},
		{"operator-add", wire.SubjectOperatorAdd, endpoint(nc, h, wire.SubjectOperatorAdd, h.Operators.Add, verbTimeout)},
		{"operator-list", wire.SubjectOperatorList, endpoint(nc, h, wire.SubjectOperatorList, h.Operators.List, verbTimeout)},
		{"operator-show", wire.SubjectOperatorShow, endpoint(nc, h, wire.SubjectOperatorShow, h.Operators.Show, verbTimeout)},
		{"operator-remove", wire.SubjectOperatorRemove, endpoint(nc, h, wire.SubjectOperatorRemove, h.Operators.Remove, verbTimeout)},
	}
	for _, e := range endpoints {
		// Every caller's calls of the verb: the token after mesh.op is
		// the caller's key, which the bus proved (wire.CallerSubject).
		if err := svc.AddEndpoint(e.name, e.handler, micro.WithEndpointSubject(wire.EndpointSubject(e.subject))); err != nil {
			svc.Stop()
			return nil, err
		}
	}
	// Where a request stands is asked of every controller, not of one in
	// the queue group: only the one that took it knows (wire/inflight.go).
	if err := svc.AddEndpoint("request-state", endpoint(nc, h, wire.SubjectRequestState, h.inflight.State, verbTimeout),
		micro.WithEndpointSubject(wire.EndpointSubject(wire.SubjectRequestState)), micro.WithEndpointQueueGroupDisabled()); err != nil {
		svc.Stop()
		return nil, err
	}
	return svc, nil
}

// endpoint adapts a typed handler. It answers before it returns, so that
// the micro service's own stats (nats micro stats: requests, errors,
// processing time) are the truth: answered on a goroutine of its own, a
// rebuild of 40 ms was counted as 4 microseconds and no failure as an
// error. Each verb has a subscription of its own, so a long verb (an
// audit, a push waiting for its fold) holds up only requests of the same
// verb to this controller; several controllers share the queue group.
func endpoint[Req, Resp any](nc *nats.Conn, h *Services, subject string, fn func(context.Context, Req) (Resp, error), timeout time.Duration) micro.Handler {
	writes := wire.Writes(subject)
	return micro.HandlerFunc(func(r micro.Request) {
		// Kept from here until it is answered, whatever the answer: a
		// client that lost its connection meanwhile asks (inflight.go).
		// Deferred, so marked after the answer below went to the
		// connection; asking where a request stands is not kept.
		if subject != wire.SubjectRequestState {
			defer h.inflight.Begin(r.Headers().Get(wire.ChunksToHeader))()
		}
		// Who asked, from the subject the bus let the caller publish on,
		// before anything of the request is read: a role that may not
		// call the verb learns nothing from its answer.
		by, err := h.Operators.Authorize(wire.CallerOf(r.Subject()), subject)
		if err != nil {
			r.Error(core.Code(err), err.Error(), nil, micro.WithHeaders(micro.Headers{wire.KindHeader: {aggregates.Kind(err)}}))
			return
		}
		var req Req
		if len(r.Data()) > 0 {
			if err := json.Unmarshal(r.Data(), &req); err != nil {
				r.Error(wire.CodeBadRequest, "the request is not the JSON this endpoint takes: "+err.Error(), nil)
				return
			}
		}
		ctx, cancel := context.WithTimeout(events.WithBy(context.Background(), by), timeout)
		defer cancel()
		if writes {
			var uncut context.CancelFunc
			ctx, uncut = h.Core.CutOnTrouble(ctx)
			defer uncut()
		}
		began := time.Now()
		resp, err := fn(ctx, req)
		if h.Core.Metrics != nil {
			code := ""
			if err != nil {
				code = core.Code(err)
			}
			h.Core.Metrics.Command(verbOf(subject), time.Since(began), code)
		}
		if writes {
			h.Core.Observe(err)
		}
		if cut := core.CutBy(ctx); err != nil && cut != nil {
			// Whatever the verb made of its cut context (a canceled
			// publish, a wait that ended), the cause is the bus.
			r.Error(wire.CodeCut, "the controller stopped waiting on the bus: "+cut.Error(), nil)
			return
		}
		if err != nil {
			// The refusal's kind travels with it, so the client's error is
			// of the same kind (errors.Is) as the one the controller made.
			r.Error(core.Code(err), err.Error(), nil, micro.WithHeaders(micro.Headers{wire.KindHeader: {aggregates.Kind(err)}}))
			return
		}
		if l, ok := any(resp).(wire.Listed); ok {
			err = wire.RespondListed(nc, r, l)
		} else {
			var b []byte
			if b, err = json.Marshal(resp); err == nil {
				err = wire.Respond(nc, r, b)
			}
		}
		if err != nil {
			// Most often an answer over the bus's max payload: say so,
			// rather than leave the client waiting for a reply that
			// will never come.
			r.Error(wire.CodeInternal, "the controller could not send its answer: "+err.Error(), nil)
		}
	})
}

// observe logs the bus's storage trouble once when a write first meets it,
// and once when a write lands again: a full disk is worth two lines in the
// controller's log, not one per command.
// verbOf is a subject's verb as metrics name it: "node.enroll", "push".
func verbOf(subject string) string { return strings.TrimPrefix(subject, wire.APIPrefix+".") }
