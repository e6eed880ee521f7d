package commands

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Error codes on the wire (Nats-Service-Error-Code), HTTP-like so that
// `nats micro` users read them at a glance.
const (
	// KindHeader carries a refusal's kind (aggregates.Kind) beside its
	// code: the code says how a client treats it, the kind what it was.
	KindHeader     = "Mesh-Error-Kind"
	CodeBadRequest = "400"
	CodeNotFound   = "404"
	CodeConflict   = "409"
	CodeInternal   = "500"
	// CodeUnavailable: the controller serves reads only (its fold stopped).
	CodeUnavailable = "503"
	// CodeCut: a write was cut while it waited on the bus, which stopped
	// taking events (ErrBusDown): what it appended before is in the log,
	// what it was appending may or may not be, so the client says its
	// outcome is unknown with what the log holds.
	CodeCut = "504"
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
func Serve(nc *nats.Conn, h *Handlers) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name: ServiceName, Version: ServiceVersion,
		Description: "the mesh controller: nodes, modules, assignments, plans and signed pushes",
	})
	if err != nil {
		return nil, err
	}
	endpoints := []struct {
		name, subject string
		handler       micro.Handler
	}{
		{"node-enroll", SubjectNodeEnroll, endpoint(nc, h, SubjectNodeEnroll, h.Enroll, verbTimeout)},
		{"node-retire", SubjectNodeRetire, endpoint(nc, h, SubjectNodeRetire, h.Retire, verbTimeout)},
		{"node-change", SubjectNodeChange, endpoint(nc, h, SubjectNodeChange, h.ChangeNode, verbTimeout)},
		{"node-list", SubjectNodeList, endpoint(nc, h, SubjectNodeList, h.ListNodes, verbTimeout)},
		{"node-show", SubjectNodeShow, endpoint(nc, h, SubjectNodeShow, h.ShowNode, verbTimeout)},
		{"node-assign", SubjectNodeAssign, endpoint(nc, h, SubjectNodeAssign, h.Assign, verbTimeout)},
		{"node-unassign", SubjectNodeUnassign, endpoint(nc, h, SubjectNodeUnassign, h.Unassign, verbTimeout)},
		{"node-plan", SubjectNodePlan, endpoint(nc, h, SubjectNodePlan, h.Plan, verbTimeout)},
		{"node-enroll-batch", SubjectNodeEnrollBatch, endpoint(nc, h, SubjectNodeEnrollBatch, h.EnrollBatch, verbTimeout)},
		{"node-assign-batch", SubjectNodeAssignBatch, endpoint(nc, h, SubjectNodeAssignBatch, h.AssignBatch, verbTimeout)},
		{"node-select", SubjectNodeSelect, endpoint(nc, h, SubjectNodeSelect, h.SelectNodes, verbTimeout)},
		{"node-join", SubjectNodeJoin, endpoint(nc, h, SubjectNodeJoin, h.Join, verbTimeout)},
		{"node-rekey", SubjectNodeRekey, endpoint(nc, h, SubjectNodeRekey, h.Rekey, verbTimeout)},
		{"token-create", SubjectTokenCreate, endpoint(nc, h, SubjectTokenCreate, h.CreateToken, verbTimeout)},
		{"token-list", SubjectTokenList, endpoint(nc, h, SubjectTokenList, h.ListTokens, verbTimeout)},
		{"token-revoke", SubjectTokenRevoke, endpoint(nc, h, SubjectTokenRevoke, h.RevokeToken, verbTimeout)},
		{"push", SubjectPush, endpoint(nc, h, SubjectPush, h.Push, pushTimeout)},
		{"rollout-start", SubjectRolloutStart, endpoint(nc, h, SubjectRolloutStart, h.StartRollout, pushTimeout)},
		{"rollout-control", SubjectRolloutControl, endpoint(nc, h, SubjectRolloutControl, h.ControlRollout, verbTimeout)},
		{"rollout-list", SubjectRolloutList, endpoint(nc, h, SubjectRolloutList, h.ListRollouts, verbTimeout)},
		{"rollout-show", SubjectRolloutShow, endpoint(nc, h, SubjectRolloutShow, h.ShowRollout, verbTimeout)},
		{"rollout-plan", SubjectRolloutPlan, endpoint(nc, h, SubjectRolloutPlan, h.PlanRollout, pushTimeout)},
		{"network-set", SubjectNetworkSet, endpoint(nc, h, SubjectNetworkSet, h.SetNetwork, verbTimeout)},
		{"network-show", SubjectNetworkShow, endpoint(nc, h, SubjectNetworkShow, h.ShowNetwork, verbTimeout)},
		{"network-address", SubjectNetworkAddress, endpoint(nc, h, SubjectNetworkAddress, h.FixAddress, verbTimeout)},
		{"seat-list", SubjectSeatList, endpoint(nc, h, SubjectSeatList, h.ListSeats, verbTimeout)},
		{"seat-show", SubjectSeatShow, endpoint(nc, h, SubjectSeatShow, h.ShowSeat, verbTimeout)},
		{"seat-handover", SubjectSeatHandover, endpoint(nc, h, SubjectSeatHandover, h.HandoverSeat, pushTimeout)},
		{"push-plan", SubjectPushPlan, endpoint(nc, h, SubjectPushPlan, h.PushPlan, pushTimeout)},
		{"rotate", SubjectRotate, endpoint(nc, h, SubjectRotate, h.Rotate, verbTimeout)},
		{"secret-forget", SubjectSecretForget, endpoint(nc, h, SubjectSecretForget, h.ForgetSecret, verbTimeout)},
		{"declare", SubjectDeclare, endpoint(nc, h, SubjectDeclare, h.Declare, verbTimeout)},
		{"status", SubjectStatus, endpoint(nc, h, SubjectStatus, h.Status, verbTimeout)},
		{"report", SubjectReport, endpoint(nc, h, SubjectReport, h.Report, verbTimeout)},
		{"history", SubjectHistory, endpoint(nc, h, SubjectHistory, h.History, verbTimeout)},
		{"audit", SubjectAudit, endpoint(nc, h, SubjectAudit, h.Audit, rebuildTimeout)},
		{"foreign-list", SubjectForeignList, endpoint(nc, h, SubjectForeignList, h.ListForeign, verbTimeout)},
		{"foreign-ack", SubjectForeignAck, endpoint(nc, h, SubjectForeignAck, h.AckForeign, verbTimeout)},
		{"report-judge", SubjectReportJudge, endpoint(nc, h, SubjectReportJudge, h.JudgeReport, verbTimeout)},
		{"module-register", SubjectModuleRegister, endpoint(nc, h, SubjectModuleRegister, h.RegisterModule, verbTimeout)},
		{"module-list", SubjectModuleList, endpoint(nc, h, SubjectModuleList, h.ListModules, verbTimeout)},
		{"module-show", SubjectModuleShow, endpoint(nc, h, SubjectModuleShow, h.ShowModule, verbTimeout)},
		{"projections-status", SubjectProjectionsStatus, endpoint(nc, h, SubjectProjectionsStatus, h.ProjectionsStatus, verbTimeout)},
		{"projections-rebuild", SubjectProjectionsRebuild, endpoint(nc, h, SubjectProjectionsRebuild, h.RebuildProjections, rebuildTimeout)},
		{"projections-verify", SubjectProjectionsVerify, endpoint(nc, h, SubjectProjectionsVerify, h.VerifyProjections, rebuildTimeout)},
	}
	for _, e := range endpoints {
		if err := svc.AddEndpoint(e.name, e.handler, micro.WithEndpointSubject(e.subject)); err != nil {
			svc.Stop()
			return nil, err
		}
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
func endpoint[Req, Resp any](nc *nats.Conn, h *Handlers, subject string, fn func(context.Context, Req) (Resp, error), timeout time.Duration) micro.Handler {
	writes := Writes(subject)
	return micro.HandlerFunc(func(r micro.Request) {
		var req Req
		if len(r.Data()) > 0 {
			if err := json.Unmarshal(r.Data(), &req); err != nil {
				r.Error(CodeBadRequest, "the request is not the JSON this endpoint takes: "+err.Error(), nil)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if writes {
			var uncut context.CancelFunc
			ctx, uncut = h.cutOnTrouble(ctx)
			defer uncut()
		}
		began := time.Now()
		resp, err := fn(ctx, req)
		if h.metrics != nil {
			code := ""
			if err != nil {
				code = codeOf(err)
			}
			h.metrics.Command(verbOf(subject), time.Since(began), code)
		}
		if writes {
			h.observe(err)
		}
		if cut := cutBy(ctx); err != nil && cut != nil {
			// Whatever the verb made of its cut context (a canceled
			// publish, a wait that ended), the cause is the bus.
			r.Error(CodeCut, "the controller stopped waiting on the bus: "+cut.Error(), nil)
			return
		}
		if err != nil {
			// The refusal's kind travels with it, so the client's error is
			// of the same kind (errors.Is) as the one the controller made.
			r.Error(codeOf(err), err.Error(), nil, micro.WithHeaders(micro.Headers{KindHeader: {aggregates.Kind(err)}}))
			return
		}
		b, err := json.Marshal(resp)
		if err == nil {
			err = respond(nc, r, b)
		}
		if err != nil {
			// Most often an answer over the bus's max payload: say so,
			// rather than leave the client waiting for a reply that
			// will never come.
			r.Error(CodeInternal, "the controller could not send its answer: "+err.Error(), nil)
		}
	})
}

// observe logs the bus's storage trouble once when a write first meets it,
// and once when a write lands again: a full disk is worth two lines in the
// controller's log, not one per command.
// verbOf is a subject's verb as metrics name it: "node.enroll", "push".
func verbOf(subject string) string { return strings.TrimPrefix(subject, APIPrefix+".") }

func (h *Handlers) observe(err error) {
	switch {
	case errors.Is(err, store.ErrStorage):
		if !h.storageFull.Swap(true) {
			h.Log.Error(err.Error())
		}
	case err == nil:
		if h.storageFull.Swap(false) {
			h.Log.Info("the bus stores events again")
		}
	}
}

func codeOf(err error) string {
	switch {
	case errors.Is(err, aggregates.ErrInvalid):
		return CodeBadRequest
	case errors.Is(err, aggregates.ErrUnknownNode), errors.Is(err, aggregates.ErrUnknownModule):
		return CodeNotFound
	case errors.Is(err, aggregates.ErrNameTaken), errors.Is(err, aggregates.ErrRetired), errors.Is(err, aggregates.ErrUncomposable),
		errors.Is(err, aggregates.ErrContended):
		return CodeConflict
	case errors.Is(err, ErrReadOnly):
		return CodeUnavailable
	}
	return CodeInternal
}
