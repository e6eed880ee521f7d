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
// not write outside dir.
func Unpack(fs vfs.FS, r io.Reader, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Name == "" || h.Name == "." || h.Name == ".." || strings.ContainsAny(h.Name, `/\`) {
			return fmt.Errorf("disk: the snapshot holds %q (type %c), not a plain file of one directory", h.Name, h.Typeflag)
		}
		f, err := fs.Create(fs.PathJoin(dir, h.Name), "")
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	// The tar's end is not the stream's: the digest is checked at the
	// stream's end, after any padding.
	_, err := io.Copy(io.Discard, r)
	return err
}
