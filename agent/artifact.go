package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/manifest"
)

// Artifacts on the node (issue 32). Before a declaration is applied, every
// artifact it installs is in the agent's cache, under the state directory,
// each file named by its digest: fetched from the bus through the
// consumer the controller hands the node, its sha256 checked as the bytes
// arrive, and only then renamed into the cache. Bytes that are not the
// signed digest make the whole declaration refused, naming both digests,
// and nothing of it is written. An apply copies from the cache into the
// root (a temporary file beside the target, its digest checked again,
// synced, then renamed), so a re-apply, a drift put back, or a restart
// fetches nothing.

// DefaultArtifactCacheBytes bounds the cache (Config.ArtifactCacheBytes):
// past it, digests the applied declaration does not install go, oldest
// used first. What the applied declaration installs always stays.
const DefaultArtifactCacheBytes int64 = 1 << 30

// artifactDir is the cache's directory.
func (a *Agent) artifactDir() string { return filepath.Join(a.cfg.State, "artifacts") }

// prepareArtifacts fetches and checks o's artifacts before anything of it
// is written: bytes that are not the signed digest refuse it (o.err); an
// error answered is one to read the declaration again for.
func (a *Agent) prepareArtifacts(ctx context.Context, o *opened) error {
	refused, err := a.fetchArtifacts(ctx, &o.d)
	var bad *artifact.MismatchError
	if errors.As(err, &bad) {
		o.err = err
		return nil
	}
	o.refusedArtifacts = refused
	return err
}

// fetchArtifacts puts every artifact d installs into the cache. It
// answers the digests the controller refused to hand, with why (their
// resources fail at apply); a *artifact.MismatchError when bytes were not
// the signed digest's (the declaration is refused); and any other error
// for the next read to try again.
func (a *Agent) fetchArtifacts(ctx context.Context, d *declaration.Declaration) (map[string]error, error) {
	refused := map[string]error{}
	a.sweepCutFetches()
	for _, r := range d.Resources {
		if r.Kind != manifest.KindArtifact || refused[r.Digest] != nil {
			continue
		}
		if !manifest.ValidDigest(r.Digest) {
			refused[r.Digest] = fmt.Errorf("its digest %q is not a sha256", r.Digest)
			continue
		}
		cached := filepath.Join(a.artifactDir(), r.Digest)
		if _, err := os.Stat(cached); err == nil {
			now := time.Now()
			_ = os.Chtimes(cached, now, now) // used: the last the cache lets go
			continue
		}
		err := a.fetchPatiently(ctx, r, cached)
		var no *artifact.RefusedError
		switch {
		case errors.As(err, &no):
			refused[r.Digest] = err
		case err != nil:
			return nil, err
		}
	}
	return refused, nil
}

// fetchRetryFor bounds how long a fetch is asked again after an answer
// that may change (the controller busy with other nodes' asks, a bus
// that dropped a chunk): a fleet fetching at once is spread out by the
// pauses, and past the bound the declaration is read again later.
const fetchRetryFor = 2 * time.Minute

// fetchPatiently is fetchOne, asked again after a random pause, doubling
// from 100 ms to 5 s, while the error is one to try again.
func (a *Agent) fetchPatiently(ctx context.Context, r compose.Resource, cached string) error {
	deadline := time.Now().Add(fetchRetryFor)
	pause := 100 * time.Millisecond
	for {
		err := a.fetchOne(ctx, r, cached)
		var bad *artifact.MismatchError
		var no *artifact.RefusedError
		if err == nil || errors.As(err, &bad) || errors.As(err, &no) || time.Now().After(deadline) {
			return err
		}
		a.cfg.Log.Info("fetching an artifact again", "path", r.Path, "why", err)
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// fetchOne fetches r's bytes into cached, through a temporary file that
// is renamed only once their digest is r's.
func (a *Agent) fetchOne(ctx context.Context, r compose.Resource, cached string) error {
	if err := os.MkdirAll(filepath.Dir(cached), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(cached), "."+r.Digest+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(ctx, artifact.FetchTimeout)
	defer cancel()
	start := time.Now()
	var w io.Writer = tmp
	if a.cfg.Fetching != nil {
		w = &told{w: tmp, fn: func(n int64) { a.cfg.Fetching(r.Digest, n) }}
	}
	err = artifact.Fetch(ctx, a.st.NC(), a.cfg.Join.Node, r.Path, r.Digest, r.Size, w)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	a.cfg.Log.Info("fetched artifact", "path", r.Path, "digest", manifest.ShortBuild(r.Digest), "bytes", r.Size, "took", time.Since(start).Round(time.Millisecond))
	return os.Rename(tmp.Name(), cached)
}

// told is a writer that tells fn how many bytes it took so far.
type told struct {
	w  io.Writer
	n  int64
	fn func(int64)
}

func (t *told) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	t.fn(t.n)
	return n, err
}

// sweepCutFetches removes the temporary files of fetches a kill cut part
// way (fetchOne removes its own otherwise), before any fetch begins:
// fetches run on the goroutine that applies, so none is under way now.
// Never renamed, their bytes were never in the cache, nor counted in it.
func (a *Agent) sweepCutFetches() {
	entries, err := os.ReadDir(a.artifactDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.Remove(filepath.Join(a.artifactDir(), e.Name()))
		}
	}
}

// trimArtifacts lets cached digests go, oldest used first, while the
// cache holds more than its bound; never one d installs.
func (a *Agent) trimArtifacts(d *declaration.Declaration) {
	keep := map[string]bool{}
	for _, r := range d.Resources {
		keep[r.Digest] = true
	}
	entries, err := os.ReadDir(a.artifactDir())
	if err != nil {
		return
	}
	type cached struct {
		name string
		size int64
		used time.Time
	}
	var all []cached
	var total int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // a fetch cut part way: sweepCutFetches's
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !manifest.ValidDigest(e.Name()) {
			continue
		}
		total += info.Size()
		if !keep[e.Name()] {
			all = append(all, cached{e.Name(), info.Size(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(x, y cached) int { return x.used.Compare(y.used) })
	for _, c := range all {
		if total <= a.cfg.ArtifactCacheBytes {
			return
		}
		if os.Remove(filepath.Join(a.artifactDir(), c.name)) == nil {
			total -= c.size
		}
	}
}

// artifact writes r's bytes from the cache unless the root holds them
// with the declared mode already. The copy's digest is checked before
// the rename: a cache file changed behind the agent is never installed.
func (ap *applier) artifact(name string, r compose.Resource, perm fs.FileMode, info fs.FileInfo, exists bool) (bool, error) {
	if err := ap.refusedArtifacts[r.Digest]; err != nil {
		return false, fmt.Errorf("the controller did not hand its artifact %s: %v", manifest.ShortBuild(r.Digest), err)
	}
	if exists {
		if !info.Mode().IsRegular() {
			return false, fmt.Errorf("%s exists and is not a regular file", r.Path)
		}
		if same, _ := ap.holdsBytes(name, r, info); same {
			if info.Mode().Perm() == perm {
				return false, nil
			}
			return true, rootError(ap.root.Chmod(name, perm))
		}
	}
	src, err := os.Open(filepath.Join(ap.cache, r.Digest))
	if err != nil {
		return false, fmt.Errorf("its artifact %s is not in the agent's cache (%v); the next declaration fetches it", manifest.ShortBuild(r.Digest), err)
	}
	defer src.Close()
	return ap.writeAtomically(name, perm, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), src); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != r.Digest {
			_ = os.Remove(filepath.Join(ap.cache, r.Digest))
			return &artifact.MismatchError{What: r.Path + " (from the agent's cache, now emptied of it)", Want: r.Digest, Got: got}
		}
		return nil
	})
}

// holdsBytes says whether the file at name holds exactly r's bytes: its
// size first, then (unless its stat is the one last found right) its
// sha256, read in pieces.
func (ap *applier) holdsBytes(name string, r compose.Resource, info fs.FileInfo) (bool, error) {
	if info.Size() != r.Size {
		return false, nil
	}
	key := statOf(info)
	if ap.verified != nil && key != (fileStat{}) && ap.verified[r.Path] == key {
		return true, nil
	}
	f, err := ap.root.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	got, _, err := artifact.Hash(f)
	same := err == nil && got == r.Digest
	if same && ap.verified != nil {
		ap.verified[r.Path] = key
	}
	return same, err
}

// program is the path a runtime starts: its artifact's, under the root,
// when the declaration says the program is one (compose.Runtime.Digest),
// else its command as given, found on the agent's PATH.
func program(root string, r compose.Runtime) string {
	if r.Digest != "" {
		return filepath.Join(root, filepath.FromSlash(r.Command))
	}
	return r.Command
}

// holdsBytesOf is holdsBytes for a drift check: a file that cannot be
// read does not hold them.
func (ap *applier) holdsBytesOf(name string, r compose.Resource, info fs.FileInfo) bool {
	same, err := ap.holdsBytes(name, r, info)
	return err == nil && same
}
