package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// maxDriftPaths bounds the paths one drift report names (a report has
// MaxReport bytes); the count says how many more.
const maxDriftPaths = 100

// checkDrift (rule 22) compares what the mesh owns under the root with the
// declaration applied last. A resource changed or removed behind the
// agent's back is put back and reported as a corrective change, and the
// programs of its module start again (their config was put back); with
// DriftReport it is reported once and left as found.
func (a *Agent) checkDrift(ctx context.Context) {
	a.keysForDrift(ctx)
	a.mu.Lock()
	d := a.applied
	if d == nil || len(d.Resources) == 0 {
		a.mu.Unlock()
		return
	}
	root, err := os.OpenRoot(a.cfg.Root)
	if err != nil {
		a.mu.Unlock()
		a.cfg.Log.Warn("cannot check for drift", "err", err)
		return
	}
	if a.verified == nil {
		a.verified = map[string]fileStat{}
	}
	ap := applier{root: root, state: a.state, node: a.cfg.Join.Node, seal: a.seal, keys: a.keys, changedModules: map[string]bool{}, verified: a.verified}
	ap.systemctlProgram, ap.ctx = a.cfg.Systemctl, ctx
	drifted := ap.drifted(d.Resources, a.failed)
	if len(drifted) == 0 {
		root.Close()
		a.drifted = ""
		a.mu.Unlock()
		return
	}
	ev := events.DriftFound{Node: a.cfg.Join.Node, Sequence: d.Sequence}
	if a.cfg.DriftReport {
		for _, r := range drifted {
			ev.Paths = append(ev.Paths, r.Path)
		}
		said := strings.Join(ev.Paths, "\n")
		root.Close()
		if said == a.drifted {
			a.mu.Unlock()
			return // said already
		}
		a.drifted = said
	} else {
		ev.Corrected = true
		for _, r := range drifted {
			if _, err := ap.one(r); err != nil {
				a.cfg.Log.Warn("drift: cannot put a resource back", "path", r.Path, "err", err)
				continue
			}
			ap.changedModules[r.Module] = true
			ev.Paths = append(ev.Paths, r.Path)
		}
		for _, f := range ap.settleUnits() { // a unit put back is read and restarted
			a.cfg.Log.Warn("drift: cannot restart a unit put back", "path", f.Path, "err", f.Reason)
		}
		root.Close()
	}
	if len(ev.Paths) > maxDriftPaths {
		ev.Paths = append(ev.Paths[:maxDriftPaths], fmt.Sprintf("... and %d more", len(ev.Paths)-maxDriftPaths))
	}
	if len(ev.Paths) > 0 {
		a.cfg.Log.Warn("drift", "since_sequence", d.Sequence, "corrected", ev.Corrected, "paths", strings.Join(ev.Paths, ", "))
		a.send(ctx, reportID("x", d.Sequence, d.Node), ev)
	}
	runs, changed := d.Runs, ap.changedModules
	a.mu.Unlock()
	if ev.Corrected && len(changed) > 0 {
		a.sup.restart(runs, changed)
	}
}

// drifted lists the resources that differ from what the root holds, in
// declaration order: missing, another kind, another mode, other content.
// Those that failed to apply (failed) are not drift.
func (a *applier) drifted(resources []compose.Resource, failed map[string]bool) []compose.Resource {
	var out []compose.Resource
	for _, r := range resources {
		if failed[r.Path] || a.unknowable(r) {
			continue
		}
		if same, err := a.holds(r); err != nil || !same {
			out = append(out, r)
		}
	}
	return out
}

// holds says whether the root holds r as declared. It reads, never writes.
func (a *applier) holds(r compose.Resource) (bool, error) {
	name, perm, err := target(r)
	if err != nil {
		return false, err
	}
	info, err := a.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if info.Mode().Perm() != perm {
		return false, nil
	}
	switch r.Kind {
	case manifest.KindDirectory:
		return info.IsDir(), nil
	case manifest.KindFile, manifest.KindUnit:
		if !info.Mode().IsRegular() {
			return false, nil
		}
		want, err := a.content(r)
		if err != nil {
			return false, err
		}
		if info.Size() != int64(len(want)) {
			return false, nil
		}
		// The file as it was when its content was last found right: its
		// inode, size, modification and change times. A write or a chmod
		// moves the change time, which no one can set back (utimes sets
		// the others), so the same stat is the same content, as git's
		// index trusts; only a file whose stat moved is read again.
		key := statOf(info)
		if a.verified != nil && key != (fileStat{}) && a.verified[r.Path] == key {
			return true, nil
		}
		got, err := a.root.ReadFile(name)
		same := err == nil && bytes.Equal(got, want)
		if same && a.verified != nil {
			a.verified[r.Path] = key
		}
		return same, err
	}
	return false, fmt.Errorf("kind %q is not one this agent applies", r.Kind)
}

// fileStat is what says a file was not touched since it was read.
type fileStat struct {
	ino, size    int64
	mtime, ctime int64
}

func statOf(info fs.FileInfo) fileStat {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{} // not known: always read
	}
	return fileStat{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// restart starts again the programs of the modules in changed.
func (v *supervisor) restart(runs []compose.Runtime, changed map[string]bool) {
	v.mu.Lock()
	seq := uint64(0)
	for _, p := range v.procs {
		seq = max(seq, p.seq)
	}
	v.mu.Unlock()
	v.reconcile(runs, changed, nil, seq)
}

// reportRuntime sends what a program did, as the agent's signed report.
// The supervisor calls it from its own goroutines, never holding the
// agent's lock; a report the bus cannot take now is kept and sent later.
func (a *Agent) reportRuntime(ev events.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ReportTimeout)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.send(ctx, reportID("rt", 0, events.RuntimeModule(ev)), ev)
}

// keysForDrift asks for the content keys of the declaration applied last
// when none are at hand: after a restart the agent takes up what it applied
// without asking (so a controller away does not stop its programs), and a
// drift check needs them. Without an answer the check passes over those
// files (applier.unknowable) and the next one asks again.
func (a *Agent) keysForDrift(ctx context.Context) {
	a.mu.Lock()
	d, have := a.applied, a.keys != nil
	a.mu.Unlock()
	if have || len(keyed(d)) == 0 {
		return
	}
	keys, err := a.contentKeys(ctx, d)
	if err != nil {
		a.cfg.Log.Warn("drift: cannot check the files that hold secrets", "err", err)
		return
	}
	a.mu.Lock()
	if a.applied == d {
		a.keys = keys
	}
	a.mu.Unlock()
}
