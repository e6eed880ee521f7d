package status

import (
	"context"

	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// A report read straight off the stream is only what someone published on
// the node's subject: push --wait and rotate --wait read them so, and
// believed an "applied" that the fold had set aside as foreign (issue 29).
// So a waiter asks the controller how the fold took the report it found,
// and believes it only as a fact.

// JudgeReport waits until the read models have folded the message at
// r.Seq, then says whether they took it as a fact.
func (h *Service) JudgeReport(ctx context.Context, r wire.JudgeRequest) (wire.Judgement, error) {
	if err := h.Proj.WaitFor(ctx, r.Seq); err != nil {
		return wire.Judgement{}, err
	}
	j := wire.Judgement{Seq: r.Seq}
	err := h.Proj.Read(func(v *projections.View) error {
		f, found, err := v.ForeignAt(r.Seq)
		j.Foreign, j.Reason = found, f.Reason
		return err
	})
	return j, err
}

// Judge is JudgeReport, for a wait in the controller's own process.
func (h *Service) Judge(ctx context.Context, seq uint64) (wire.Judgement, error) {
	return h.JudgeReport(ctx, wire.JudgeRequest{Seq: seq})
}
