package core

import (
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
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
		v.LastSent = &wire.Sent{Sequence: s.Sequence, Digest: s.Digest, ContentDigest: s.ContentDigest, By: s.By, Operator: s.Operator, Resources: s.Resources, At: s.At}
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

// NodeView is a node's row with its assignments and, for each, the latest build.
func NodeView(v *projections.View, n projections.Node) (wire.NodeView, error) {
	nv := ViewOf(n)
	var err error
	if nv.Address, err = v.AddressOf(n.Name); err != nil {
		return nv, err
	}
	as, err := v.AssignmentsOf(n.Name)
	if err != nil {
		return nv, err
	}
	for _, a := range as {
		m, _, err := v.Module(a.Module)
		if err != nil {
			return nv, err
		}
		nv.Assignments = append(nv.Assignments, AssignmentView(a, m.Latest))
	}
	return nv, nil
}

// LatestBuilds is each module's latest build, by module name.
func LatestBuilds(v *projections.View) (map[string]string, error) {
	mods, err := v.Modules()
	latest := make(map[string]string, len(mods))
	for _, m := range mods {
		latest[m.Name] = m.Latest
	}
	return latest, err
}

// AssignmentView is an assignment as the wire shows it, a secret setting
// as its version only.
func AssignmentView(a projections.AssignmentRow, latest string) wire.AssignmentView {
	return wire.AssignmentView{Module: a.Module, Build: a.Build, Latest: latest, Settings: ShownSettings(a.Settings), Policy: a.Policy.Or()}
}

// ShownSettings is an assignment's settings as people may see them: a
// secret one as set and its version, never its value (rule 21).
func ShownSettings(settings map[string]string) map[string]string {
	out := make(map[string]string, len(settings))
	for k, v := range settings {
		out[k] = secret.Shown(v)
	}
	return out
}
