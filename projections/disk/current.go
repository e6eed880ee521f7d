package disk

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Dir is a directory of read models.
type Dir struct {
	FS   vfs.FS
	Path string
}

// The read models live in generations: Dir/gen-000001, gen-000002, ... and
// Dir/CURRENT names the one in use. A rebuild folds into the next generation
// while the current one keeps serving, then replaces CURRENT with one rename,
// so a crash at any point leaves either the old or the new generation named,
// never a half-folded one.
const currentFile = "CURRENT"

// GenerationName is the directory of generation n.
func GenerationName(n int) string { return fmt.Sprintf("gen-%06d", n) }

// GenerationNumber is the number of a generation's directory (0 for a
// name that is not one).
func GenerationNumber(gen string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(gen, "gen-"))
	return n
}

// Join is the path of name inside the directory.
func (d Dir) Join(name string) string { return d.FS.PathJoin(d.Path, name) }

// Current reads the generation CURRENT names: "" when there is none yet.
func (d Dir) Current() (string, error) {
	f, err := d.FS.Open(d.Join(currentFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("projections: cannot read %s: %w", currentFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("projections: cannot read %s: %w", currentFile, err)
	}
	gen := strings.TrimSpace(string(b))
	if GenerationNumber(gen) < 1 {
		return "", fmt.Errorf("projections: %s names %q, not a generation; remove %s to fold the read models again", currentFile, gen, d.Path)
	}
	return gen, nil
}

// SetCurrent points CURRENT at gen: written aside, synced, renamed over,
// and the directory synced, so that after a crash CURRENT names the old
// generation or gen, never nothing.
func (d Dir) SetCurrent(gen string) error {
	tmp := d.Join(currentFile + ".tmp")
	f, err := d.FS.Create(tmp, "")
	if err != nil {
		return fmt.Errorf("projections: cannot write %s: %w", currentFile, err)
	}
	if _, err := f.Write([]byte(gen + "\n")); err != nil {
		f.Close()
		return fmt.Errorf("projections: cannot write %s: %w", currentFile, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("projections: cannot sync %s: %w", currentFile, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := d.FS.Rename(tmp, d.Join(currentFile)); err != nil {
		return fmt.Errorf("projections: cannot replace %s: %w", currentFile, err)
	}
	dir, err := d.FS.OpenDir(d.Path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// Create makes the directory and syncs its parent, so that after a crash
// CURRENT and the generations are found where they were written, not lost
// with an unsynced directory entry.
func (d Dir) Create() error {
	if err := d.FS.MkdirAll(d.Path, 0o755); err != nil {
		return fmt.Errorf("projections: cannot create %s: %w", d.Path, err)
	}
	parent, err := d.FS.OpenDir(d.FS.PathDir(d.Path))
	if err != nil {
		return fmt.Errorf("projections: cannot open the parent of %s: %w", d.Path, err)
	}
	defer parent.Close()
	return parent.Sync()
}
