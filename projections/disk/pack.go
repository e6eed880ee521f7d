package disk

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A generation of read models travels as a tar stream of its files (a
// Pebble checkpoint is one flat directory), written and read in pieces,
// so a snapshot of any size passes through a fixed amount of memory.

// Pack writes every file of the flat directory dir to w as a tar stream.
func Pack(fs vfs.FS, dir string, w io.Writer) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, n := range names {
		path := fs.PathJoin(dir, n)
		st, err := fs.Stat(path)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("disk: %s holds a directory, %s; a generation is flat", dir, n)
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		f, err := fs.Open(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Unpack writes the files of the tar stream r into dir (made if missing)
// and reads r to its end, where a reader that checks a digest says whether
// what it gave was whole. Anything but plain files with plain names (a
// path, "..", a link) is refused: the stream came over the bus, and must
// not write outside dir. Every file is synced before Unpack returns, and
// any file's failure is its error.
func Unpack(fs vfs.FS, r io.Reader, dir string) (err error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Each file is synced beside the reading of the next, not before it:
	// a sync in line stopped the read, and with it the bus's sending, for
	// as long as the disk took (416 MB of 13 MB files synced in line 0.73
	// s, beside 0.41-0.51; a start from a snapshot of ten million events
	// fetches 435 MiB). At most syncsInFlight at once.
	syncs := make(chan error, syncsInFlight)
	inFlight := 0
	wait := func() {
		if serr := <-syncs; err == nil {
			err = serr
		}
		inFlight--
	}
	defer func() {
		for inFlight > 0 {
			wait()
		}
	}()
	tr := tar.NewReader(r)
	for {
		h, terr := tr.Next()
		if errors.Is(terr, io.EOF) {
			break
		}
		if terr != nil {
			return terr
		}
		if h.Typeflag != tar.TypeReg || h.Name == "" || h.Name == "." || h.Name == ".." || strings.ContainsAny(h.Name, `/\`) {
			return fmt.Errorf("disk: the snapshot holds %q (type %c), not a plain file of one directory", h.Name, h.Typeflag)
		}
		f, cerr := fs.Create(fs.PathJoin(dir, h.Name), "")
		if cerr != nil {
			return cerr
		}
		if _, werr := io.Copy(f, tr); werr != nil {
			f.Close()
			return werr
		}
		if inFlight == syncsInFlight {
			if wait(); err != nil {
				f.Close() // its sync is never started
				return err
			}
		}
		inFlight++
		go func() {
			serr := f.Sync()
			if cerr := f.Close(); serr == nil {
				serr = cerr
			}
			syncs <- serr
		}()
	}
	// The tar's end is not the stream's: the digest is checked at the
	// stream's end, after any padding.
	if _, cerr := io.Copy(io.Discard, r); cerr != nil {
		return cerr
	}
	return nil // the syncs still in flight answer in the deferred wait
}

// syncsInFlight bounds the files Unpack has written and not yet synced.
const syncsInFlight = 4
