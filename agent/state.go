package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
)

// State is what the agent keeps between runs, in its state directory: where
// it stands, what the mesh owns under the root, and reports not yet published.
type State struct {
	Node         string `json:"node"`
	LastSequence uint64 `json:"last_sequence"` // the highest sequence applied (or tried)
	LastDigest   string `json:"last_digest"`
	// Declared are the paths of the last declaration applied.
	Declared []string `json:"declared"`
	// Owned says, for each path the mesh has declared or created, whether
	// the mesh created it (true) or found it there and adopted it (false).
	Owned   map[string]bool `json:"owned"`
	Pending []Pending       `json:"pending"`
	// Facts and FactCaps are what it last reported of its machine: it
	// reports again only when they change.
	Facts    map[string]string `json:"facts,omitempty"`
	FactCaps []string          `json:"fact_capabilities,omitempty"`
	// Applying is the apply under way: saved before the first resource is
	// written, and cleared in the same save that keeps its report (send),
	// so a state that holds it after a restart is an apply that was cut
	// part way. Nil between applies.
	Applying *Applying `json:"applying,omitempty"`
	// Units are the unit files the mesh declared, by path, each with the
	// sha256 of the content last enabled and restarted ("" before its
	// first): a unit is restarted when its content is not that (unit.go).
	Units map[string]string `json:"units,omitempty"`
}

// Applying is an apply the agent began: which declaration, and when.
type Applying struct {
	Sequence uint64    `json:"sequence"`
	Digest   string    `json:"digest"`
	BeganAt  time.Time `json:"began_at"`
	// Created are the paths it declares for the first time that were not
	// there when it began: whatever stands there after a cut, the mesh
	// made. Without them the apply after the cut found those files there
	// and adopted them, and they stayed when the mesh stopped declaring
	// them.
	Created []string `json:"created,omitempty"`
}

// beginApply records, durably, that the declaration of seq is about to be
// applied. It costs a state save per apply; without it a kill part way
// through leaves a root of new and old files that nothing names.
func (a *Agent) beginApply(seq uint64, digest string, created []string) {
	a.state.Applying = &Applying{Sequence: seq, Digest: digest, BeganAt: time.Now().UTC(), Created: created}
	if err := a.state.save(a.cfg.State); err != nil {
		a.cfg.Log.Error(err.Error())
	}
}

// reportInterrupted says, once, that the apply the state holds as begun was
// cut part way (ApplyInterrupted), before the agent applies anything again.
// The record is cleared in the save that keeps the report, so it is said
// once even when the bus is away (kept, then sent like any report).
func (a *Agent) reportInterrupted(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ap := a.state.Applying
	if ap == nil {
		return
	}
	a.cfg.Log.Warn("the last apply was cut part way: its files were part new, part old; applying again",
		"sequence", ap.Sequence, "began_at", ap.BeganAt)
	for _, p := range ap.Created {
		if _, known := a.state.Owned[p]; !known {
			a.state.Owned[p] = true // made by the cut apply, or to be made by the next
		}
	}
	a.sweepCutWrites()
	a.state.Applying = nil
	a.send(ctx, reportID("i", ap.Sequence, ap.Digest), events.ApplyInterrupted{Node: a.cfg.Join.Node,
		Sequence: ap.Sequence, Digest: ap.Digest, BeganAt: ap.BeganAt})
}

// Pending is a report that could not be published yet.
type Pending struct {
	ID    string          `json:"id"`
	Type  string          `json:"type"`
	Event json.RawMessage `json:"event"`
}

const stateFile = "state.json"

func loadState(dir, node string) (*State, error) {
	s := &State{Node: node, Owned: map[string]bool{}}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: cannot read its state: %w", err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("agent: its state %s is damaged (%v); move it aside to start afresh (what the mesh created will then be treated as adopted)", filepath.Join(dir, stateFile), err)
	}
	if s.Node != node {
		return nil, fmt.Errorf("agent: the state in %s is node %s's, not %s's; give each node its own --state", dir, s.Node, node)
	}
	if s.Owned == nil {
		s.Owned = map[string]bool{}
	}
	return s, nil
}

// save writes the state aside, syncs it and renames it over the old one, so
// a crash leaves the old state or the new, never half of one.
func (s *State) save(dir string) error {
	return writeSynced(filepath.Join(dir, stateFile), s)
}

// writeSynced writes v as JSON to path that way: aside, synced, renamed.
func writeSynced(path string, v any) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent: cannot create its state directory: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("agent: cannot write its state: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("agent: cannot replace its state: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// sweepCutWrites removes the temporary file a write cut part way left
// beside a path the mesh owns (tempOf): the next apply rewrites only what
// differs, so one beside a file that came out the same would otherwise
// stay under the root for good. Only after an interrupted apply, when one
// can exist; a path that cannot be reached is left for the apply to name.
func (a *Agent) sweepCutWrites() {
	root, err := os.OpenRoot(a.cfg.Root)
	if err != nil {
		return
	}
	defer root.Close()
	for p := range a.state.Owned {
		if err := root.Remove(strings.TrimPrefix(tempOf(p), "/")); err == nil {
			a.cfg.Log.Info("removed what a cut write left", "path", tempOf(p))
		}
	}
}
