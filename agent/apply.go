package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
)

// applier puts resources under one root. Every file operation goes through
// an os.Root, which refuses any path that leaves the root, by ".." or by a
// symlink on the way: a declaration cannot touch anything outside it.
type applier struct {
	root  *os.Root
	state *State
	node  string
	seal  opener // opens sealed content
	// keys are the content keys of the files that printed secret
	// settings, as the controller gave them for this declaration.
	keys map[string]contentKey
	// owners are the modules of the paths of the declaration applied
	// before (nil: not known, after a restart), and changedModules
	// collects the modules of which a resource was written or removed:
	// their programs start again.
	owners         map[string]string
	changedModules map[string]bool
	// verified is the stat of each file when its content was last found
	// right (drift.go), nil for none kept: a drift check reads only files
	// whose stat moved since.
	verified map[string]fileStat
	// systemctlProgram is Config.Systemctl, and ctx the agent's run, which
	// cuts a systemctl call short when the agent stops; dueUnits and
	// unitsGone are what this apply owes systemd at its end (unit.go).
	systemctlProgram string
	ctx              context.Context
	dueUnits         []dueUnit
	unitsGone        bool
	// cache is the directory of the artifacts fetched (artifact.go), and
	// refusedArtifacts those the controller would not hand, with why.
	cache            string
	refusedArtifacts map[string]error
}

// owners maps each path of d to its module.
func owners(d *declaration.Declaration) map[string]string {
	out := map[string]string{}
	if d != nil {
		for _, r := range d.Resources {
			out[r.Path] = r.Module
		}
	}
	return out
}

// apply makes the root hold exactly resources: each declared resource is
// written where its content or mode differ, and each the previous declaration
// held but this one does not is removed if the mesh created it. It answers
// how many resources it changed and which failed, and why.
func (a *applier) apply(resources []compose.Resource) (int, []events.ResourceFailure) {
	changed := 0
	var failed []events.ResourceFailure
	declared := map[string]bool{}
	for _, r := range resources {
		declared[r.Path] = true
		did, err := a.one(r)
		if err != nil {
			failed = append(failed, events.ResourceFailure{Path: r.Path, Reason: err.Error()})
			continue
		}
		if did {
			changed++
			if a.changedModules != nil {
				a.changedModules[r.Module] = true
			}
		}
	}
	failed = append(failed, a.unitsLeave(resources, declared)...) // before their files go
	changed += a.removeUndeclared(declared)
	failed = append(failed, a.settleUnits()...)
	a.state.Declared = slices.Sorted(func(yield func(string) bool) {
		for p := range declared {
			if !yield(p) {
				return
			}
		}
	})
	return changed, failed
}

// rel is the path os.Root takes for a declared absolute path. A path that is
// not absolute and clean is refused before it reaches the file system.
func rel(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return "", fmt.Errorf("%s is not an absolute, clean path", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// target is where r lands under the root, and its permission bits.
func target(r compose.Resource) (string, fs.FileMode, error) {
	name, err := rel(r.Path)
	if err != nil {
		return "", 0, err
	}
	mode, err := manifest.ParseMode(r.Mode)
	if err != nil {
		return "", 0, err
	}
	return name, fs.FileMode(mode) & fs.ModePerm, nil
}

// content is what a file resource holds, opened if it travelled sealed:
// the clear content exists only in the file it is written to (rule 21).
func (a *applier) content(r compose.Resource) ([]byte, error) {
	switch {
	case r.Sealed != nil:
		content, err := a.seal.open(a.node, r.Path, r.Sealed.Box)
		if err != nil {
			return nil, fmt.Errorf("its sealed content does not open with this node's key (%v); the join string may be another node's", err)
		}
		if len(r.Sealed.Keys) > 0 {
			if content, err = a.openKeyed(r, content); err != nil {
				return nil, err
			}
		}
		return a.seal.fill(content), nil
	case r.Content != nil:
		return []byte(*r.Content), nil
	}
	return []byte{}, nil
}

func (a *applier) one(r compose.Resource) (bool, error) {
	name, perm, err := target(r)
	if err != nil {
		return false, err
	}
	created, err := a.parents(name)
	if err != nil {
		return false, err
	}
	info, err := a.root.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, rootError(err)
	}
	if exists && info.Mode()&fs.ModeSymlink != 0 {
		return false, fmt.Errorf("%s is a symlink; the agent does not write through links", r.Path)
	}
	if _, known := a.state.Owned[r.Path]; !known {
		// The first time the mesh declares this path: what is there already
		// is adopted, and stays when the mesh stops declaring it.
		a.state.Owned[r.Path] = !exists
	}
	switch r.Kind {
	case manifest.KindDirectory:
		return a.directory(name, r.Path, perm, info, exists)
	case manifest.KindFile:
		content, err := a.content(r)
		if err != nil {
			return false, err
		}
		return a.file(name, r.Path, perm, content, info, exists)
	case manifest.KindUnit:
		return a.unit(name, r, perm, info, exists)
	case manifest.KindArtifact:
		return a.artifact(name, r, perm, info, exists)
	}
	return created, fmt.Errorf("kind %q is not one this agent applies", r.Kind)
}

func (a *applier) directory(name, p string, perm fs.FileMode, info fs.FileInfo, exists bool) (bool, error) {
	switch {
	case !exists:
		if err := a.root.Mkdir(name, perm); err != nil {
			return false, rootError(err)
		}
		return true, rootError(a.root.Chmod(name, perm)) // Mkdir's mode is filtered by the umask
	case !info.IsDir():
		return false, fmt.Errorf("%s exists and is not a directory", p)
	case info.Mode().Perm() != perm:
		return true, rootError(a.root.Chmod(name, perm))
	}
	return false, nil
}

// file writes content atomically (a temporary file beside it, synced, then
// renamed over it) unless the file already holds it with the declared mode.
func (a *applier) file(name, p string, perm fs.FileMode, content []byte, info fs.FileInfo, exists bool) (bool, error) {
	if exists {
		if !info.Mode().IsRegular() {
			return false, fmt.Errorf("%s exists and is not a regular file", p)
		}
		if info.Size() == int64(len(content)) {
			have, err := a.root.ReadFile(name)
			if err == nil && bytes.Equal(have, content) {
				if info.Mode().Perm() == perm {
					return false, nil
				}
				return true, rootError(a.root.Chmod(name, perm))
			}
		}
	}
	return a.writeAtomically(name, perm, func(w io.Writer) error { _, err := w.Write(content); return err })
}

// tempOf is the temporary file beside name that writeAtomically fills:
// one name a path, so a kill part way leaves at most one, which the next
// write of name reuses and an interrupted apply's restart removes
// (sweepCutWrites).
func tempOf(name string) string { return path.Join(path.Dir(name), ".mesh-"+path.Base(name)+".tmp") }

// writeAtomically writes name through a temporary file beside it: write
// fills it, it is synced, given perm and renamed over name, and the
// directory synced. A write that fails leaves name as it was and no
// temporary file behind: a reader never sees half a file.
func (a *applier) writeAtomically(name string, perm fs.FileMode, write func(io.Writer) error) (bool, error) {
	tmp := tempOf(name)
	f, err := a.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return false, rootError(err)
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = a.root.Chmod(tmp, perm)
	}
	if err == nil {
		err = a.root.Rename(tmp, name)
	}
	if err != nil {
		a.root.Remove(tmp)
		return false, rootError(err)
	}
	return true, a.syncDir(path.Dir(name))
}

// parents creates the missing directories above name (0755), recording each
// as created by the mesh, and answers whether it created any.
func (a *applier) parents(name string) (bool, error) {
	created := false
	dir := path.Dir(name)
	if dir == "." {
		return false, nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		info, err := a.root.Stat(sub)
		switch {
		case err == nil && info.IsDir():
			continue
		case err == nil:
			return created, fmt.Errorf("/%s is in the way: it is not a directory", sub)
		case !errors.Is(err, fs.ErrNotExist):
			return created, rootError(err)
		}
		if err := a.root.Mkdir(sub, 0o755); err != nil {
			return created, rootError(err)
		}
		if _, known := a.state.Owned["/"+sub]; !known {
			a.state.Owned["/"+sub] = true
		}
		created = true
	}
	return created, nil
}

// absentNew are the paths of resources declared for the first time that
// are not under the root now: an apply cut part way made whatever stands
// there after it (Applying.Created). A stat each, on first declaration only.
func (a *applier) absentNew(resources []compose.Resource) []string {
	var out []string
	for _, r := range resources {
		if _, known := a.state.Owned[r.Path]; known {
			continue
		}
		name, err := rel(r.Path)
		if err != nil {
			continue
		}
		if _, err := a.root.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			out = append(out, r.Path)
		}
	}
	return out
}

// removeUndeclared removes, deepest first, what the previous declaration held
// and this one does not, where the mesh created it; an adopted resource is
// forgotten and left. A directory is removed only when empty: what is left
// in it is not the mesh's to delete.
func (a *applier) removeUndeclared(declared map[string]bool) int {
	var gone []string
	for p := range a.state.Owned {
		if !declared[p] && !a.ancestorOfDeclared(p, declared) {
			gone = append(gone, p)
		}
	}
	slices.SortFunc(gone, func(x, y string) int { return strings.Compare(y, x) }) // children before parents
	removed := 0
	for _, p := range gone {
		created := a.state.Owned[p]
		delete(a.state.Owned, p)
		if !created {
			continue
		}
		name, err := rel(p)
		if err != nil {
			continue
		}
		if err := a.root.Remove(name); err == nil {
			removed++
			if m := a.owners[p]; m != "" && a.changedModules != nil {
				a.changedModules[m] = true
			}
		}
	}
	return removed
}

func (a *applier) ancestorOfDeclared(p string, declared map[string]bool) bool {
	for d := range declared {
		if strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

func (a *applier) syncDir(name string) error {
	d, err := a.root.Open(name)
	if err != nil {
		return rootError(err)
	}
	defer d.Close()
	return d.Sync()
}

// rootError says an escape in the words of the rule it breaks.
func rootError(err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "escapes from parent") {
		return fmt.Errorf("the path leads out of the agent's root (through a symlink or ..); nothing outside was touched")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %v", pe.Op, "/"+pe.Path, pe.Err)
	}
	return err
}
