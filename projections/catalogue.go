package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections/rows"
)

// ModuleRow is the catalogue's row for one module: every build registered
// under its name, oldest first, and the latest, which assignments take.
type ModuleRow struct {
	Name   string     `json:"name"`
	Latest string     `json:"latest"`
	Builds []BuildRow `json:"builds"`
}

// BuildRow is one registration of a build.
type BuildRow struct {
	Build        string    `json:"build"`
	RegisteredAt time.Time `json:"registered_at"`
	Seq          uint64    `json:"seq"`
}

// AssignmentRow is one module on one node (rows.AssignmentRow: its binary
// codec is there).
type AssignmentRow = rows.AssignmentRow

// foldCatalogue applies registrations and assignments.
func foldCatalogue(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.ModuleRegistered:
		var m ModuleRow
		if _, err := getJSON(b, moduleKey(ev.Module), &m); err != nil {
			return err
		}
		m.Name, m.Latest = ev.Module, ev.Build
		m.Builds = append(m.Builds, BuildRow{Build: ev.Build, RegisteredAt: rec.Envelope.OccurredAt, Seq: rec.Seq})
		if err := putJSON(b, moduleKey(ev.Module), m); err != nil {
			return err
		}
		// The manifest's bytes are kept exactly as registered: the build is
		// their digest, and composition reads them back.
		return b.Set(pairKey(prefixBuild, ev.Module, ev.Build), ev.Manifest, nil)
	case events.ModuleAssigned:
		row := AssignmentRow{Node: ev.Node, Module: ev.Module, Build: ev.Build, Settings: ev.Settings,
			AssignedAt: rec.Envelope.OccurredAt, Seq: rec.Seq, Policy: ev.Policy}
		if err := b.Set(pairKey(prefixAssign, ev.Node, ev.Module), rows.EncodeAssignment(row), nil); err != nil {
			return err
		}
		return b.Set(pairKey(prefixAssignByModule, ev.Module, ev.Node), nil, nil)
	case events.ModuleUnassigned:
		if err := b.Delete(pairKey(prefixAssign, ev.Node, ev.Module), nil); err != nil {
			return err
		}
		return b.Delete(pairKey(prefixAssignByModule, ev.Module, ev.Node), nil)
	}
	return nil
}

// keysUnder lists the suffixes of the keys under prefix (for index scans).
func keysUnder(r pebble.Reader, prefix []byte) ([]string, error) {
	lo, hi := prefixBounds(prefix...)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key()[len(prefix):]))
	}
	return out, it.Error()
}

func getRaw(r pebble.Reader, key []byte) (json.RawMessage, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("projections: cannot read %q: %w", key, err)
	}
	defer closer.Close()
	return append(json.RawMessage(nil), v...), true, nil
}

// assignmentRows decodes the assignment rows under prefix, in key order.
func assignmentRows(r pebble.Reader, prefix []byte) ([]AssignmentRow, error) {
	return scanRows(r, prefix, func(k, v []byte) (AssignmentRow, error) {
		node, module, ok := strings.Cut(string(k[1:]), string(rune(sep)))
		if !ok {
			return AssignmentRow{}, rows.ErrCorrupt
		}
		return rows.DecodeAssignment(node, module, v)
	})
}
