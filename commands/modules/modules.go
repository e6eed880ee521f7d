package modules

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/seats"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// RegisterModule enters a manifest's build into the catalogue, or says it is
// already the latest build and appends nothing.
func (h *Service) RegisterModule(ctx context.Context, r wire.RegisterRequest) (wire.Registered, error) {
	m, err := manifest.Parse([]byte(r.Manifest))
	if err != nil {
		return wire.Registered{}, aggregates.Refuse("register", r.File, aggregates.ErrInvalid, err.Error())
	}
	if len(m.Artifacts()) > 0 {
		if err := h.CatchUp(ctx); err != nil {
			return wire.Registered{}, err
		}
		if err := h.Proj.Read(func(v *projections.View) error { return resolveArtifacts(v, r.File, &m) }); err != nil {
			return wire.Registered{}, err
		}
	}
	var previous string
	seq, err := core.Decide(ctx, h.Core, "register", events.ModuleAggregate(m.Module), r.CommandID,
		func() *aggregates.Module { return aggregates.NewModule(m.Module) },
		func(a *aggregates.Module) ([]events.Event, error) {
			previous = a.Latest
			return a.Decide(aggregates.RegisterModule{Manifest: m})
		})
	if err != nil {
		return wire.Registered{}, err
	}
	if seq != 0 {
		h.Log.Info("module registered", "module", m.Module, "build", manifest.ShortBuild(m.Build()), "seq", seq)
	}
	if m.Run != nil {
		// Its running instances keep their state there from their start.
		if _, err := assertState(ctx, h.Store.JetStream(), h.Replicas, m.Module); err != nil {
			return wire.Registered{}, fmt.Errorf("registered %s at sequence %d, but %w; register it again to retry", m.Module, seq, err)
		}
	}
	for _, seat := range m.Claims {
		// Work can be asked of a seat before anyone holds it.
		if _, err := seats.AssertSeatQueue(ctx, h.Store.JetStream(), h.Replicas, seat); err != nil {
			return wire.Registered{}, fmt.Errorf("registered %s at sequence %d, but %w; register it again to retry", m.Module, seq, err)
		}
	}
	return wire.Registered{Changed: seq != 0, Seq: seq, Module: m.Module, Build: m.Build(), Previous: previous}, nil
}

// ListModules answers the catalogue.
func (h *Service) ListModules(context.Context, wire.Empty) (wire.ModuleList, error) {
	out := wire.ModuleList{Modules: []wire.ModuleView{}}
	err := h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Modules()
		if err != nil {
			return err
		}
		for _, row := range rows {
			mv, err := h.moduleView(v, row)
			if err != nil {
				return err
			}
			out.Modules = append(out.Modules, mv)
		}
		return nil
	})
	return out, err
}

// ShowModule answers one module: its builds, its latest manifest, where it is assigned.
func (h *Service) ShowModule(_ context.Context, r wire.NameRequest) (wire.ModuleView, error) {
	var out wire.ModuleView
	err := h.Proj.Read(func(v *projections.View) error {
		row, found, err := v.Module(r.Name)
		if err != nil {
			return err
		}
		if !found {
			return aggregates.Refuse("show", r.Name, aggregates.ErrUnknownModule, "no module of that name is registered; see mesh module list")
		}
		out, err = h.moduleView(v, row)
		return err
	})
	return out, err
}

func (h *Service) moduleView(v *projections.View, row projections.ModuleRow) (wire.ModuleView, error) {
	mv := wire.ModuleView{Name: row.Name, Latest: row.Latest, Builds: []wire.BuildView{}, AssignedTo: []wire.AssignedView{},
		Settings: map[string]wire.SettingView{}, Resources: []wire.ResourceView{}}
	for _, b := range row.Builds {
		mv.Builds = append(mv.Builds, wire.BuildView{Build: b.Build, RegisteredAt: b.RegisteredAt, Seq: b.Seq})
	}
	nodes, err := v.AssignedTo(row.Name)
	if err != nil {
		return mv, err
	}
	for _, n := range nodes {
		as, err := v.AssignmentsOf(n)
		if err != nil {
			return mv, err
		}
		for _, a := range as {
			if a.Module == row.Name {
				mv.AssignedTo = append(mv.AssignedTo, wire.AssignedView{Node: n, Build: a.Build, Latest: a.Build == row.Latest})
			}
		}
	}
	m, found, err := h.world.Manifest(v, compose.BuildRef{Module: row.Name, Build: row.Latest})
	if err != nil || !found {
		// Named, not fatal: one unreadable build must not hide the catalogue.
		mv.Unreadable = fmt.Sprintf("the latest build %s cannot be read: %v; register the module again", manifest.ShortBuild(row.Latest), err)
		return mv, nil
	}
	mv.Requires, mv.Provides, mv.Consumes = m.Requires, m.Provides, m.Consumes
	for k, s := range m.Settings {
		mv.Settings[k] = wire.SettingView{Default: s.Default, Required: s.Required}
	}
	for _, r := range m.Resources {
		mv.Resources = append(mv.Resources, wire.ResourceView{Kind: r.Kind, Path: r.Path, Mode: r.Mode})
	}
	return mv, nil
}
