package embedded_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats.go/jetstream"
)

// A write the bus's disk refuses (here the process's file size limit, the
// same error path as a full disk) marks the stream, and the bus answers no
// publish to it even once the disk takes writes again; KeepStorage says so
// once and, with room again, starts JetStream again: the next publish is
// stored. (What the server acknowledged but had not yet flushed when the
// write failed may be gone: that is the server's durability, see
// docs/faults.md, "Durability".) The limit is the whole process's, so the scenario runs
// in a process of its own: in this one it would fail the test framework's
// own writes too.
func TestKeepStorageRecoversFromAFailedWrite(t *testing.T) {
	if os.Getenv("MESH_FAILED_WRITE_SCENARIO") != "" {
		failedWriteScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKeepStorageRecoversFromAFailedWrite$", "-test.v")
	cmd.Env = append(os.Environ(), "MESH_FAILED_WRITE_SCENARIO=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the scenario failed: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("the scenario could not run here:\n%s", out)
	}
}

func failedWriteScenario(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.x", []byte("before")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var said []error
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.KeepStorage(wctx, slog.New(slog.DiscardHandler), func(err error) {
		mu.Lock()
		said = append(said, err)
		mu.Unlock()
	})
	saidNow := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), said...)
	}

	// Files may grow no further: the next block write fails.
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip("no file size limit here:", err)
	}
	blocks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "S", "msgs", "*.blk"))
	var size int64
	for _, b := range blocks {
		if fi, err := os.Stat(b); err == nil {
			size = max(size, fi.Size())
		}
	}
	limit := syscall.Rlimit{Cur: uint64(size) + 1, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Skip("cannot set a file size limit here:", err)
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	_, err = js.Publish(c, "s.x", make([]byte, 4096))
	cancel()
	restored := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if restored != nil {
		t.Fatal(restored)
	}
	if err == nil {
		t.Skip("the write was not refused: the block had room")
	}
	embeddedtest.Eventually(t, "KeepStorage to say the failure, then its recovery", func() bool {
		s := saidNow()
		return len(s) >= 2 && errors.Is(s[0], embedded.ErrStorageFailed) && s[1] == nil
	})
	c, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ack, err := js.Publish(c, "s.x", []byte("after")); err != nil {
		t.Fatalf("a publish after the recovery: %+v %v", ack, err)
	}
}

// The bus's data directory removed under it: the server would go on writing
// into files nothing finds again, so KeepStorage says so, once.
func TestKeepStorageSaysTheDataDirectoryIsGone(t *testing.T) {
	dir := t.TempDir()
	srv, err := embedded.Start(context.Background(), embedded.Options{Dir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	said := make(chan error, 4)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go srv.KeepStorage(ctx, slog.New(slog.DiscardHandler), func(err error) { said <- err })
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-said:
		if !errors.Is(err, embedded.ErrDataGone) {
			t.Fatalf("KeepStorage said %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("KeepStorage said nothing of a removed data directory")
	}
}
