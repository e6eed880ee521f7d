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

// restoreAckWait bounds the wait for the oldest publish in flight to be
// acknowledged (a window of a thousand lands in milliseconds): a bus that
// stops answering ends the restore with an error in seconds, never a wait
// for ever. restoreDrainWait bounds the wait, on the way out, for what is
// still in flight.
var (
	restoreAckWait   = 10 * time.Second
	restoreDrainWait = 5 * time.Second
)

// RestoredIDHeader carries, on a restored message, the Nats-Msg-Id it was
// first written under. A restore publishes without Nats-Msg-Id: JetStream
// keeps one record per id for its duplicates window, counted from when the
// message is stored, so a log in which one id repeats further apart than
// the window (an agent that recorded its key again after minutes, before
// its ids changed at every start) would lose the repeat, and the restore
// would no longer be the log. MsgID reads either header.
const RestoredIDHeader = "Mesh-Restored-Msg-Id"

// MsgID is the id a stored message was written under: its Nats-Msg-Id, or
// a restored message's first one. An append that checks whether its own
// retry landed compares this, so the check holds across a restore.
func MsgID(h nats.Header) string {
	if id := h.Get(jetstream.MsgIDHeader); id != "" {
		return id
	}
	return h.Get(RestoredIDHeader)
}

// ImportError is a restore that stopped part way: how much of the backup
// is in the stream, and why it stopped. The stream stays marked as a
// restore under way, so no controller serves it, and the same restore run
// again resumes after Landed.
type ImportError struct {
	Stream string
	Landed uint64 // the last sequence known to hold the backup's event
	Total  uint64 // the backup's events
	Err    error
}

func (e *ImportError) Error() string {
	return fmt.Sprintf("store: the restore stopped with %d of %d event(s) in stream %s: %v; run the same restore again to resume after event %d (or with --force to start over)",
		e.Landed, e.Total, e.Stream, e.Err, e.Landed)
}

func (e *ImportError) Unwrap() error { return e.Err }

// ErrInterrupted is why a restore whose context ended stopped (a signal).
var ErrInterrupted = errors.New("interrupted")

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
	w := &restoreFlight{s: s, landed: st.LastSeq}
	stopped := func(err error) (uint64, uint64, error) {
		if ctx.Err() != nil {
			err = ErrInterrupted
		}
		w.drain()
		return n, from, &ImportError{Stream: s.name, Landed: w.landed, Total: m.Messages, Err: err}
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	var lines uint64
	for {
		var line backupLine
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return stopped(fmt.Errorf("the backup's line %d is damaged: %w", lines+1, err))
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
		if ctx.Err() != nil {
			return stopped(ctx.Err())
		}
		f, err := s.js.PublishMsgAsync(restoredMsg(line))
		if err != nil {
			return stopped(fmt.Errorf("cannot publish event %d: %w", line.Seq, storageFault(err)))
		}
		w.pending = append(w.pending, pendingRestore{seq: line.Seq, future: f})
		n++
		if err := w.settle(ctx, restoreWindow-1); err != nil {
			return stopped(err)
		}
	}
	if err := w.settle(ctx, 0); err != nil {
		return stopped(err)
	}
	if lines != m.Messages {
		return n, from, &ImportError{Stream: s.name, Landed: w.landed, Total: m.Messages,
			Err: fmt.Errorf("the backup holds %d event(s), but its manifest says %d", lines, m.Messages)}
	}
	return n, from, s.mark(ctx, nil)
}

// restoredMsg is a backup's line as the restore publishes it: its subject,
// bytes and headers, without what was checked when it was first written
// (expectations, batch headers), its Nats-Msg-Id carried as
// RestoredIDHeader, and expecting the sequence before its own, so it lands
// exactly where it was or not at all.
func restoredMsg(line backupLine) *nats.Msg {
	msg := nats.NewMsg(line.Subject)
	msg.Data = line.Data
	for k, vs := range line.Header {
		switch {
		case strings.HasPrefix(k, "Nats-Expected-"), strings.HasPrefix(k, "Nats-Batch-"):
			continue
		case k == jetstream.MsgIDHeader:
			// A second message under an id the stream still remembers
			// would be answered "duplicate" and not stored: the log
			// would lose an event and every later one would miss its
			// sequence. See RestoredIDHeader.
			if len(vs) > 0 && line.Header.Get(RestoredIDHeader) == "" {
				msg.Header.Set(RestoredIDHeader, vs[0])
			}
			continue
		}
		for _, v := range vs {
			msg.Header.Add(k, v)
		}
	}
	msg.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(line.Seq-1, 10))
	return msg
}

// restoreFlight is a restore's publishes in flight, oldest first, and the
// last sequence acknowledged in order.
type restoreFlight struct {
	s       *Store
	pending []pendingRestore
	landed  uint64
}

type pendingRestore struct {
	seq    uint64
	future jetstream.PubAckFuture
}

// settle takes acknowledgements, oldest first, until at most keep publishes
// are in flight. A publish leaves pending as soon as its answer is taken,
// whatever it says: an answer is read once, and waiting on it again (as
// drain would) waits for ever. Each wait is bounded by restoreAckWait.
func (w *restoreFlight) settle(ctx context.Context, keep int) error {
	for len(w.pending) > keep {
		p := w.pending[0]
		var (
			ack *jetstream.PubAck
			err error
		)
		select { // most answers are in already: no timer for those
		case ack = <-p.future.Ok():
		case err = <-p.future.Err():
		default:
			t := time.NewTimer(restoreAckWait)
			select {
			case ack = <-p.future.Ok():
			case err = <-p.future.Err():
			case <-t.C:
				return fmt.Errorf("the bus did not acknowledge event %d within %s", p.seq, restoreAckWait)
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
		}
		w.pending = w.pending[1:]
		if err != nil {
			return fmt.Errorf("cannot restore event %d: %w", p.seq, storageFault(err))
		}
		if ack.Duplicate || ack.Sequence != p.seq {
			return fmt.Errorf("event %d landed at %d (duplicate: %t); the stream is not this backup's", p.seq, ack.Sequence, ack.Duplicate)
		}
		w.landed = p.seq
	}
	return ctx.Err()
}

// drain waits, at most restoreDrainWait in all, for the publishes still in
// flight to land or fail, so a restore that stopped returns with nothing
// of its own still landing: one that landed after the return met the next
// run's resume as "wrong last sequence" (seen under load). Those that land
// in order still count as landed.
func (w *restoreFlight) drain() {
	deadline := time.NewTimer(restoreDrainWait)
	defer deadline.Stop()
	ordered := true
	for _, p := range w.pending {
		select {
		case ack := <-p.future.Ok():
			if ordered && !ack.Duplicate && ack.Sequence == p.seq && p.seq == w.landed+1 {
				w.landed = p.seq
			} else {
				ordered = false
			}
		case <-p.future.Err():
			ordered = false
		case <-deadline.C:
			w.pending = nil
			return
		}
	}
	w.pending = nil
}

// Replace deletes the stream and asserts it again, empty: restore --force.
func (s *Store) Replace(ctx context.Context, c StreamConfig) (*Store, error) {
	if err := s.js.DeleteStream(ctx, s.name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("store: cannot remove stream %s: %w", s.name, err)
	}
	ns, _, err := Open(ctx, s.nc, c)
	return ns, err
}
