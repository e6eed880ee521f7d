package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go/jetstream"
)

// backupOf appends n enrolments, each under its own command id (so each
// message carries a Nats-Msg-Id), and answers the stream's backup.
func backupOf(t *testing.T, n int) (store.BackupManifest, []byte) {
	t.Helper()
	ctx := context.Background()
	src := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		if _, err := src.Append(ctx, events.NodeAggregate(name), 0, "cmd-"+name, enrolled(name)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	m, err := src.Export(ctx, &b)
	if err != nil {
		t.Fatal(err)
	}
	return m, b.Bytes()
}

// importing runs Import and waits for it to return: a wait bounded by
// embeddedtest.Settle, so an import that hangs fails the test, named.
func importing(t *testing.T, ctx context.Context, s *store.Store, m store.BackupManifest, r io.Reader) (n, from uint64, err error) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); n, from, err = s.Import(ctx, m, r) }()
	embeddedtest.Eventually(t, "the restore to return", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	return n, from, err
}

// A bus that refuses a restored message ends the restore with an error
// that says how far it got and how to go on (rule 26): it used to wait,
// for ever, on the refused message's answer it had already taken.
func TestARestoreTheBusRefusesSaysWhy(t *testing.T) {
	ctx := context.Background()
	m, backup := backupOf(t, 20)
	dst := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	// A stream that takes 5 messages and refuses the sixth.
	info, err := dst.JetStream().Stream(ctx, dst.Name())
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 5, jetstream.DiscardNew
	if _, err := dst.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, _, err = importing(t, ctx, dst, m, bytes.NewReader(backup))
	var ie *store.ImportError
	if !errors.As(err, &ie) || ie.Landed != 5 || ie.Total != 20 || !strings.Contains(err.Error(), "cannot restore event 6") ||
		!strings.Contains(err.Error(), "run the same restore again") {
		t.Fatalf("a restore into a stream that refuses the sixth event: %v", err)
	}
	if marker, err := dst.Restoring(ctx); err != nil || marker == nil {
		t.Fatalf("the stream after a refused restore is not marked as one under way: %v %v", marker, err)
	}
}

// A restore whose context ends (mesh restore given SIGINT or SIGTERM)
// stops at once, saying how much landed; the same restore again resumes
// right after it and finishes.
func TestAnInterruptedRestoreSaysHowFarAndResumes(t *testing.T) {
	ctx := context.Background()
	m, backup := backupOf(t, 300)
	dst := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	ictx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	// The signal arrives once the restore has read half the backup.
	r := &cutReader{r: bytes.NewReader(backup), at: len(backup) / 2, cut: interrupt}
	_, _, err := importing(t, ictx, dst, m, r)
	var ie *store.ImportError
	if !errors.As(err, &ie) || !errors.Is(err, store.ErrInterrupted) || ie.Landed == 0 || ie.Landed >= 300 {
		t.Fatalf("an interrupted restore: %v", err)
	}
	st, err := dst.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastSeq != ie.Landed {
		t.Fatalf("the interrupted restore says %d landed; the stream holds %d", ie.Landed, st.LastSeq)
	}
	n, from, err := importing(t, ctx, dst, m, bytes.NewReader(backup))
	if err != nil || from != ie.Landed+1 || n+from-1 != 300 {
		t.Fatalf("the restore again: published %d from %d: %v", n, from, err)
	}
	if marker, err := dst.Restoring(ctx); err != nil || marker != nil {
		t.Fatalf("a finished restore is still marked: %v %v", marker, err)
	}
}

// cutReader calls cut once at reaches at bytes read.
type cutReader struct {
	r    io.Reader
	read int
	at   int
	cut  func()
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.read >= c.at && c.cut != nil {
		c.cut()
		c.cut = nil
	}
	if len(p) > 512 {
		p = p[:512] // small reads, so the cut falls inside the backup
	}
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}
