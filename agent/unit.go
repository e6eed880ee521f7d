package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// Units (issue 32): a unit resource is a file in manifest.UnitDir under the
// root, written as any file is (atomically, only when it differs), which
// systemd is then told of. In one apply, in this order:
//
//  1. each unit that leaves (declared before, not now) and that the mesh
//     created is stopped and disabled while its file is still there
//     (disable reads its [Install] section); an adopted unit is left in
//     place, running, as rule 9 leaves adopted files;
//  2. the files that leave are removed;
//  3. if a unit was written or removed, systemctl daemon-reload, once;
//  4. each unit whose content is not the content last enabled and
//     restarted is enabled, then restarted.
//
// A unit whose content is what it last restarted is not touched: an apply
// that changes nothing calls systemctl not at all. Which content each unit
// last settled on is in the state (State.Units), not read from systemd, so
// a unit whose restart failed, or an apply killed between writing a unit
// and restarting it, is restarted by the next apply even though its file
// is already right. A systemctl that fails fails the unit's resource, with
// the unit and systemctl's own words.

// systemctlTimeout bounds one systemctl call. A restart waits for the
// unit's start job, which systemd itself bounds (TimeoutStartSec, 90s by
// default); past this the agent names the call rather than hang its
// follow loop, which holds its lock meanwhile.
const systemctlTimeout = 3 * time.Minute

// dueUnit is a unit written, or found unsettled, in this apply: enabled and
// restarted at its end.
type dueUnit struct {
	path, name, sum string
}

// unit puts a unit resource's file in place and notes it for settleUnits.
// The name is checked again here, though composition checked it: a hand
// declaration is signed by the controller too, and a name systemctl could
// read as a flag must never reach it.
func (a *applier) unit(name string, r compose.Resource, perm fs.FileMode, info fs.FileInfo, exists bool) (bool, error) {
	unit := manifest.UnitName(r.Path)
	if err := manifest.ValidateUnitName(unit); err != nil {
		return false, fmt.Errorf("%s is not a unit this agent installs: %v", r.Path, err)
	}
	content, err := a.content(r)
	if err != nil {
		return false, err
	}
	did, err := a.file(name, r.Path, perm, content, info, exists)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(content)
	hexSum := hex.EncodeToString(sum[:])
	if a.state.Units == nil {
		a.state.Units = map[string]string{}
	}
	settled, known := a.state.Units[r.Path]
	if !known {
		a.state.Units[r.Path] = "" // known from now on: leaving, it is stopped
	}
	// Written: systemd may have read what was there (a drift put back).
	if did || settled != hexSum {
		a.dueUnits = append(a.dueUnits, dueUnit{path: r.Path, name: unit, sum: hexSum})
	}
	return did, nil
}

// unitsLeave stops and disables, in path order, each unit the mesh
// created that resources no longer declare as a unit, before its file is
// removed (or left, when the path is now declared as a plain file: systemd
// is then no longer the mesh's to tell). A unit declared still is never
// stopped here, even when its file failed to be written. One that
// systemctl fails to stop keeps its file and stays owned (it is made
// declared for the removal), and the next apply tries again: removed,
// nothing would ever stop it.
func (a *applier) unitsLeave(resources []compose.Resource, declared map[string]bool) []events.ResourceFailure {
	units := map[string]bool{}
	for _, r := range resources {
		if r.Kind == manifest.KindUnit {
			units[r.Path] = true
		}
	}
	var failed []events.ResourceFailure
	for _, p := range slices.Sorted(maps.Keys(a.state.Units)) {
		if units[p] {
			continue
		}
		if !a.state.Owned[p] {
			delete(a.state.Units, p) // adopted: left as found
			continue
		}
		unit := manifest.UnitName(p)
		err := a.systemctl("stop", unit)
		if err == nil {
			err = a.systemctl("disable", unit)
		}
		if err != nil {
			failed = append(failed, unitFailure(p, unit, err))
			declared[p] = true
			continue
		}
		delete(a.state.Units, p)
		a.unitsGone = true
	}
	return failed
}

// settleUnits reloads systemd when a unit was written or removed, then
// enables and restarts each due unit, recording the content it settled on.
func (a *applier) settleUnits() []events.ResourceFailure {
	due := a.dueUnits
	a.dueUnits = nil
	if len(due) == 0 && !a.unitsGone {
		return nil
	}
	a.unitsGone = false
	var failed []events.ResourceFailure
	if err := a.systemctl("daemon-reload"); err != nil {
		for _, u := range due {
			failed = append(failed, unitFailure(u.path, u.name, err))
		}
		if len(due) == 0 {
			failed = append(failed, events.ResourceFailure{Path: manifest.UnitDir, Reason: "the units removed: " + err.Error()})
		}
		return failed
	}
	for _, u := range due {
		err := a.systemctl("enable", u.name)
		if err == nil {
			err = a.systemctl("restart", u.name)
		}
		if err != nil {
			failed = append(failed, unitFailure(u.path, u.name, err))
			continue
		}
		a.state.Units[u.path] = u.sum
	}
	return failed
}

// unitFailure is a unit's resource failed by systemctl: the unit named
// first, then the call and systemctl's own words.
func unitFailure(path, unit string, err error) events.ResourceFailure {
	return events.ResourceFailure{Path: path, Reason: "unit " + unit + ": " + err.Error()}
}

// systemctl runs the agent's systemctl with args, and says a failure with
// the call and systemctl's own words.
func (a *applier) systemctl(args ...string) error {
	program := a.systemctlProgram
	if program == "" {
		program = "systemctl"
	}
	parent := a.ctx
	if parent == nil {
		parent = context.Background()
	}
	// Cut short when the agent stops: the unit then stays unsettled in
	// the state, and the next apply restarts it.
	ctx, cancel := context.WithTimeout(parent, systemctlTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, program, args...).CombinedOutput()
	if err == nil {
		return nil
	}
	said := strings.Join(strings.Fields(string(bytes.ToValidUTF8(out, []byte("?")))), " ")
	var exit *exec.ExitError
	switch {
	case parent.Err() != nil:
		said = "the agent stopped before it answered"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		said = fmt.Sprintf("no answer within %s", systemctlTimeout)
	case said == "" || !errors.As(err, &exit):
		said = err.Error() // not run at all: not found, not executable
	}
	return fmt.Errorf("%s %s failed: %s", program, strings.Join(args, " "), said)
}
