package disk

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
)

// packed writes files into a fresh directory of fs and packs it.
func packed(t *testing.T, fs vfs.FS, files map[string]string) []byte {
	t.Helper()
	if err := fs.MkdirAll("src", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		f, err := fs.Create(fs.PathJoin("src", name), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, body); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var buf bytes.Buffer
	if err := Pack(fs, "src", &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// read answers every file of dir in fs and its contents.
func read(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		f, err := fs.Open(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// More files than Unpack syncs at once, on a real disk, each read back
// whole: syncing beside the next file's read loses none of them.
func TestUnpackWritesEveryFileWhole(t *testing.T) {
	fs := vfs.Default
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 3*syncsInFlight + 1 {
		files[string(rune('a'+i))+".sst"] = strings.Repeat(string(rune('A'+i)), 1000*(i+1))
	}
	src := vfs.NewMem()
	if err := Unpack(fs, bytes.NewReader(packed(t, src, files)), fs.PathJoin(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(files, read(t, fs, fs.PathJoin(dir, "out"))); diff != "" {
		t.Fatalf("unpacked (-packed +read):\n%s", diff)
	}
}

// A file whose sync fails fails the unpack, whichever file it is: a
// generation that may not be on disk whole is never taken for one.
func TestUnpackSaysASyncFailed(t *testing.T) {
	files := map[string]string{}
	for i := range 2*syncsInFlight + 1 {
		files[string(rune('a'+i))+".sst"] = strings.Repeat("x", 100)
	}
	tarred := packed(t, vfs.NewMem(), files)
	for _, nth := range []int32{0, syncsInFlight, 2 * syncsInFlight} {
		var syncs atomic.Int32
		fs := &closings{FS: errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpFileSync && syncs.Add(1)-1 == nth {
				return errorfs.ErrInjected
			}
			return nil
		}))}
		err := Unpack(fs, bytes.NewReader(tarred), "out")
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("sync %d of %d failed and Unpack answered %v", nth+1, len(files), err)
		}
		// Every file it made is closed, the one whose sync it never began too.
		if fs.creates.Load() != fs.closes.Load() {
			t.Fatalf("sync %d failed: %d file(s) made, %d closed", nth+1, fs.creates.Load(), fs.closes.Load())
		}
	}
}

// closings counts the files made in an FS and those closed (errorfs does
// not see a close).
type closings struct {
	vfs.FS
	creates, closes atomic.Int32
}

func (c *closings) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	if err == nil {
		c.creates.Add(1)
		f = closingFile{f, &c.closes}
	}
	return f, err
}

type closingFile struct {
	vfs.File
	closes *atomic.Int32
}

func (f closingFile) Close() error {
	f.closes.Add(1)
	return f.File.Close()
}
