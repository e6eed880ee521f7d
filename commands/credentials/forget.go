package credentials

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/secret"
	"github.com/meshctl/mesh/wire"
)

// ForgetSecret forgets versions of a secret setting (rule 21): their salts
// are erased from the secrets bucket, so no one (the controller included)
// can open them from the log or from a backup taken after. The act is
// recorded first (SecretForgotten), then the salts erased: a controller
// killed between the two leaves salts that the same command, run again,
// finds and erases. Forgetting the current value leaves the assignment
// uncomposable until the setting is given again; status says so.
func (h *Service) ForgetSecret(ctx context.Context, r wire.ForgetRequest) (wire.Forgotten, error) {
	if err := h.Writable(); err != nil {
		return wire.Forgotten{}, err
	}
	if err := core.ValidName("forget a secret of", r.Node); err != nil {
		return wire.Forgotten{}, err
	}
	if h.Secrets == nil {
		return wire.Forgotten{}, secrets.ErrNone
	}
	refuse := func(format string, args ...any) error {
		return aggregates.Refuse("forget", fmt.Sprintf("secret %s of %s on %s", r.Setting, r.Module, r.Node), aggregates.ErrInvalid, fmt.Sprintf(format, args...))
	}
	// Decided on read models caught up first, and again after each
	// conflict (the node's aggregate moved: a push, an assignment).
	if err := h.CatchUp(ctx); err != nil {
		return wire.Forgotten{}, err
	}
	var out wire.Forgotten
	var versions map[int][]string
	var ev events.SecretForgotten
	err := core.DecideAndAppend(ctx, "forget", fmt.Sprintf("secret %s of %s on %s", r.Setting, r.Module, r.Node), h.CatchUp, func(attempt int) error {
		var row projections.Node
		var found bool
		err := h.Proj.Read(func(v *projections.View) (err error) {
			row, found, err = v.Node(r.Node)
			return err
		})
		if err != nil {
			return err
		}
		if !found {
			return aggregates.Refuse("forget a secret of", r.Node, aggregates.ErrUnknownNode, "no node of that name was ever enrolled")
		}
		var current int
		versions, current, err = h.sealedVersions(ctx, r)
		if err != nil {
			return err
		}
		if len(versions) == 0 {
			return refuse("no sealed value of it was ever recorded; mesh node show %s names the secret settings it holds", r.Node)
		}
		if r.Version != 0 {
			if _, ok := versions[r.Version]; !ok {
				return refuse("it has no version %d; its versions are %v", r.Version, slices.Sorted(maps.Keys(versions)))
			}
			versions = map[int][]string{r.Version: versions[r.Version]}
		}
		out = wire.Forgotten{Forgotten: []int{}, Already: []int{}}
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			here := false
			for _, id := range versions[v] {
				in, err := h.Secrets.Present(ctx, id)
				if err != nil {
					return err
				}
				here = here || in
			}
			if here {
				out.Forgotten = append(out.Forgotten, v)
			} else {
				out.Already = append(out.Already, v)
			}
		}
		out.Current = slices.Contains(append(slices.Clone(out.Forgotten), out.Already...), current)
		if len(out.Forgotten) == 0 {
			return nil // every version asked for is forgotten already: nothing to do
		}
		ev = events.SecretForgotten{Node: r.Node, Module: r.Module, Setting: r.Setting, Versions: out.Forgotten}
		out.Seq, err = h.Store.Append(ctx, events.NodeAggregate(r.Node), row.Version, core.PerNode(r.CommandID, r.Node, attempt), ev)
		return err
	})
	if err != nil {
		return wire.Forgotten{}, err
	}
	if len(out.Forgotten) == 0 {
		return out, nil
	}
	for _, v := range out.Forgotten {
		for _, id := range versions[v] {
			if _, err := h.Secrets.Erase(ctx, id); err != nil {
				return wire.Forgotten{}, fmt.Errorf("the forgetting is recorded (event %d) but %w; run the same command again to finish it", out.Seq, err)
			}
		}
	}
	h.Log.Info("secret forgotten", "node", r.Node, "module", r.Module, "setting", r.Setting, "versions", out.Forgotten, "seq", out.Seq)
	return out, h.Landed(ctx, out.Seq, ev)
}

// sealedVersions reads from the log every sealed value the setting was
// ever given on the node, by version, with the salt ids of each (an
// assignment removed and given again numbers its secrets from 1 again),
// and the version it holds now (0: none, or unassigned).
func (h *Service) sealedVersions(ctx context.Context, r wire.ForgetRequest) (map[int][]string, int, error) {
	versions := map[int][]string{}
	current := 0
	err := h.Store.Read(ctx, store.ReadOptions{Filter: events.NodeAggregate(r.Node).Filter()}, func(m store.Msg) error {
		_, ev, err := events.Read(m.Subject, m.Data)
		if err != nil {
			return nil // a message the fold sets aside is no value of ours
		}
		switch a := ev.(type) {
		case events.ModuleAssigned:
			if a.Module != r.Module {
				return nil
			}
			current = 0
			if s, err := secret.ParseSetting(a.Settings[r.Setting]); err == nil {
				if !slices.Contains(versions[s.Version], s.Key) {
					versions[s.Version] = append(versions[s.Version], s.Key)
				}
				current = s.Version
			}
		case events.ModuleUnassigned:
			if a.Module == r.Module {
				current = 0
			}
		}
		return nil
	})
	return versions, current, err
}
