package core

import (
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// ViewOf is a node's row as the wire shows it, before its assignments
// and address are added.
func ViewOf(n projections.Node) wire.NodeView {
	v := wire.NodeView{
		Name: n.Name, Capabilities: n.Capabilities, Labels: n.Labels, Retired: n.Retired,
		EnrolledAt: n.EnrolledAt, EnrolledSeq: n.EnrolledSeq, Version: n.Version,
	}
	if v.Capabilities == nil {
		v.Capabilities = []string{}
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	v.Assignments = []wire.AssignmentView{}
	if s := n.LastSent; s != nil {
		v.LastSent = &wire.Sent{Sequence: s.Sequence, Digest: s.Digest, ContentDigest: s.ContentDigest, By: s.By, Resources: s.Resources, At: s.At}
	}
	if r := n.LastReport; r != nil {
		v.LastReport = &wire.ReportView{Outcome: r.Outcome, Sequence: r.Sequence, Digest: r.Digest, Reason: r.Reason, Failed: r.Failed, At: r.At}
	}
	if !n.RetiredAt.IsZero() {
		at := n.RetiredAt
		v.RetiredAt = &at
	}
	return v
}
