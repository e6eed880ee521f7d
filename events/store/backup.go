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

// Import publishes a backup's messages, in order, into this store's stream,
// which must hold no events: every message lands at the sequence it had, or
// the import stops and says where it did not. Expectation headers are
// dropped (they were checked when the events were first written).
func (s *Store) Import(ctx context.Context, m BackupManifest, r io.Reader) (uint64, error) {
	st, err := s.State(ctx)
	if err != nil {
		return 0, err
	}
	if st.Msgs > 0 || st.LastSeq > 0 {
		return 0, fmt.Errorf("store: stream %s already holds %d event(s); restore only into a bus that holds no mesh yet, or give --force to replace it", s.name, st.Msgs)
	}
	if m.FirstSeq > 1 {
		return 0, fmt.Errorf("store: the backup starts at event %d; a stream can only be restored from its first event", m.FirstSeq)
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	var n uint64
	for {
		var line backupLine
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return n, fmt.Errorf("store: the backup's line %d is damaged: %w", n+1, err)
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
		ack, err := s.js.PublishMsg(ctx, msg)
		if err != nil {
			return n, fmt.Errorf("store: cannot restore event %d: %w", line.Seq, err)
		}
		if ack.Sequence != line.Seq {
			return n, fmt.Errorf("store: restored event %d landed at %d; the stream was not empty or the backup has gaps", line.Seq, ack.Sequence)
		}
		n++
	}
	if n != m.Messages {
		return n, fmt.Errorf("store: restored %d event(s), but the manifest says %d", n, m.Messages)
	}
	return n, nil
}

// Replace deletes the stream and asserts it again, empty: restore --force.
func (s *Store) Replace(ctx context.Context, c StreamConfig) (*Store, error) {
	if err := s.js.DeleteStream(ctx, s.name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("store: cannot remove stream %s: %w", s.name, err)
	}
	ns, _, err := Open(ctx, s.nc, c)
	return ns, err
}
