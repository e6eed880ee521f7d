package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events/store"
)

// A snapshot's read is bounded by its size, not by one call's bound: on a
// 3.8M-event stream a start read a 297 MiB snapshot for longer than 5 s,
// was cut "nats: timeout", passed over both snapshots and folded every
// event from the first (issue 34). Here a reader that outlasts that bound
// (a slow disk under the unpacking) still reads the snapshot whole, its
// digest checked at the end.
func TestASnapshotReadsWholePastOneCallsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	data := make([]byte, 40<<20)
	rand.Read(data)
	sn, err := s.PutSnapshot(ctx, 7, bytes.NewReader(data), func(string) map[string]string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenSnapshot(ctx, sn)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first := make([]byte, 1<<20)
	if _, err := io.ReadFull(r, first); err != nil {
		t.Fatal(err)
	}
	// Not ordering anything: the reader is slow, as a disk syncing
	// hundreds of MiB is, for longer than one call may wait.
	time.Sleep(store.CallTimeout + time.Second)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("a snapshot read for longer than %s failed: %v", store.CallTimeout, err)
	}
	if !bytes.Equal(append(first, rest...), data) {
		t.Fatalf("the snapshot read back is %d bytes, not the %d put", len(first)+len(rest), len(data))
	}
}
