package store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BackupManifest describes a backup of the stream: what it holds and the
// digest of its events file, checked before anything is restored.
type BackupManifest struct {
	Format   int       `json:"format"`
	Stream   string    `json:"stream"`
	Created  time.Time `json:"created"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Messages uint64    `json:"messages"`
	SHA256   string    `json:"sha256"`
	TakenAt  time.Time `json:"taken_at"`
}

// backupLine is one message of the stream as a backup keeps it: with its
// headers (the Msg-Id is the idempotency of what was written) and its bytes.
type backupLine struct {
	Seq     uint64      `json:"seq"`
	Subject string      `json:"subject"`
	Header  nats.Header `json:"header,omitempty"`
	Data    []byte      `json:"data"`
	Time    time.Time   `json:"time"`
}

// Export writes every message of the stream, in order, one JSON line each,
// while the mesh runs: up to the last sequence when it began.
func (s *Store) Export(ctx context.Context, w io.Writer) (BackupManifest, error) {
	st, err := s.State(ctx)
	if err != nil {
		return BackupManifest{}, err
	}
	m := BackupManifest{Format: 1, Stream: st.Stream, Created: st.Created, FirstSeq: st.FirstSeq, TakenAt: time.Now().UTC()}
	sum := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(w, sum))
	enc := json.NewEncoder(bw)
	err = s.Read(ctx, ReadOptions{Until: st.LastSeq}, func(msg Msg) error {
		m.Messages++
		m.LastSeq = msg.Seq
		return enc.Encode(backupLine{Seq: msg.Seq, Subject: msg.Subject, Header: msg.Header, Data: msg.Data, Time: msg.Time})
	})
	if err != nil {
		return m, err
	}
	if err := bw.Flush(); err != nil {
		return m, err
	}
	m.SHA256 = hex.EncodeToString(sum.Sum(nil))
	return m, nil
}

// VerifyBackup checks an events file against its manifest's digest.
func VerifyBackup(m BackupManifest, r io.Reader) error {
	if m.Format != 1 {
		return fmt.Errorf("store: the backup is format %d; this mesh reads format 1", m.Format)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, r); err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("store: the backup's events do not match its manifest (sha256 %s, manifest says %s); it is damaged or was edited", got[:12], m.SHA256[:12])
	}
	return nil
}

// restoringKey is the stream's metadata entry that marks a restore under
// way: set before the first event is published, removed after the last
// lands. A controller refuses to serve a stream that carries it (a partial
// restore is never served), and the next restore of the same backup
// resumes where the interrupted one stopped.
const restoringKey = "mesh_restoring"

// restoreWindow bounds the publishes of a restore in flight at once.
const restoreWindow = 1000

// Restoring answers the manifest of a restore into this stream that has not
// finished, or nil.
func (s *Store) Restoring(ctx context.Context) (*BackupManifest, error) {
	if err := s.needsStream("read the state of"); err != nil {
		return nil, err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: cannot read the state of stream %s: %w", s.name, err)
	}
	v, ok := info.Config.Metadata[restoringKey]
	if !ok {
		return nil, nil
	}
	var m BackupManifest
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return &BackupManifest{}, nil // a marker, unreadable: still a partial restore
	}
	return &m, nil
}

// mark sets (m non-nil) or removes the restore marker.
func (s *Store) mark(ctx context.Context, m *BackupManifest) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("store: cannot read stream %s: %w", s.name, err)
	}
	cfg := info.Config
	md := map[string]string{}
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	if m != nil {
		b, _ := json.Marshal(m)
		md[restoringKey] = string(b)
	} else {
		delete(md, restoringKey)
	}
	cfg.Metadata = md
	if s.stream, err = s.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("store: cannot mark stream %s: %w", s.name, err)
	}
	return nil
}

// Import publishes a backup's messages, in order, into this store's stream,
// all or nothing (rule 26): the stream is marked as being restored before
// the first event and unmarked after the last, so a restore killed part way
// is never served, and importing the same backup again resumes after the
// last event that landed. Every message must land at the sequence it had
// (each is published expecting the one before it, a window at a time), or
// the import stops and says where. Expectation headers are dropped (they
// were checked when the events were first written). It answers how many
// events it published, and from which sequence.
func (s *Store) Import(ctx context.Context, m BackupManifest, r io.Reader) (n, from uint64, err error) {
	st, err := s.State(ctx)
	if err != nil {
		return 0, 0, err
	}
	if m.FirstSeq > 1 {
		return 0, 0, fmt.Errorf("store: the backup starts at event %d; a stream can only be restored from its first event", m.FirstSeq)
	}
	marker, err := s.Restoring(ctx)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case marker != nil && marker.SHA256 != m.SHA256:
		return 0, 0, fmt.Errorf("store: stream %s holds part of another backup's restore (%d of %d events); finish that one, or give --force to start over with this one", s.name, st.LastSeq, marker.Messages)
	case marker == nil && (st.Msgs > 0 || st.LastSeq > 0):
		return 0, 0, fmt.Errorf("store: stream %s already holds %d event(s); restore only into a bus that holds no mesh yet, or give --force to replace it", s.name, st.Msgs)
	case marker == nil:
		if err := s.mark(ctx, &m); err != nil {
			return 0, 0, err
		}
	}
	from = st.LastSeq + 1
	dec := json.NewDecoder(bufio.NewReader(r))
	var pending []pendingRestore
	settle := func(all bool) error {
		for len(pending) > 0 && (all || len(pending) >= restoreWindow) {
			p := pending[0]
			select {
			case ack := <-p.future.Ok():
				if ack.Sequence != p.seq {
					return fmt.Errorf("store: restored event %d landed at %d; the backup has gaps", p.seq, ack.Sequence)
				}
			case err := <-p.future.Err():
				return fmt.Errorf("store: cannot restore event %d: %w; the restore stopped there, and mesh restore again resumes it", p.seq, err)
			case <-ctx.Done():
				return ctx.Err()
			}
			pending = pending[1:]
		}
		return nil
	}
	// However the restore ends, it returns only once every publish it set
	// in flight has landed or failed: one still landing after a return
	// met the next run's resume as "wrong last sequence" (seen under load).
	defer func() {
		for _, p := range pending {
			select {
			case <-p.future.Ok():
			case <-p.future.Err():
			}
		}
	}()
	var lines uint64
	for {
		var line backupLine
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return n, from, fmt.Errorf("store: the backup's line %d is damaged: %w", lines+1, err)
		}
		lines++
		if line.Seq < from {
			if line.Seq == from-1 {
				// The last event that landed must be this line: else the
				// stream holds something other than this backup's start.
				got, err := s.Get(ctx, line.Seq)
				if err != nil || got.Subject != line.Subject || string(got.Data) != string(line.Data) {
					return 0, from, fmt.Errorf("store: stream %s's event %d is not the backup's; give --force to start over", s.name, line.Seq)
				}
			}
			continue
		}
		msg := nats.NewMsg(line.Subject)
		msg.Data = line.Data
		for k, vs := range line.Header {
			if strings.HasPrefix(k, "Nats-Expected-") || strings.HasPrefix(k, "Nats-Batch-") {
				continue
			}
			for _, v := range vs {
				msg.Header.Add(k, v)
			}
		}
		msg.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(line.Seq-1, 10))
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			return n, from, fmt.Errorf("store: cannot restore event %d: %w", line.Seq, err)
		}
		pending = append(pending, pendingRestore{seq: line.Seq, future: f})
		n++
		if err := settle(false); err != nil {
			return n, from, err
		}
	}
	if err := settle(true); err != nil {
		return n, from, err
	}
	if lines != m.Messages {
		return n, from, fmt.Errorf("store: the backup holds %d event(s), but its manifest says %d", lines, m.Messages)
	}
	return n, from, s.mark(ctx, nil)
}

type pendingRestore struct {
	seq    uint64
	future jetstream.PubAckFuture
}

// Replace deletes the stream and asserts it again, empty: restore --force.
func (s *Store) Replace(ctx context.Context, c StreamConfig) (*Store, error) {
	if err := s.js.DeleteStream(ctx, s.name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("store: cannot remove stream %s: %w", s.name, err)
	}
	ns, _, err := Open(ctx, s.nc, c)
	return ns, err
}
