package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
)

// Audit is what proving a node's record found.
type Audit struct {
	Node         string   `json:"node"`
	Declarations int      `json:"declarations"`
	Keys         []string `json:"keys"`
	OK           bool     `json:"ok"`
	Break        string   `json:"break,omitempty"`
	BreakSeq     uint64   `json:"break_seq,omitempty"`
}

// keyRecord is a controller key and the stream sequence from which it signs.
type keyRecord struct {
	seq uint64
	key string
}

// AuditNode proves a node's record from the log itself: every declaration's
// signature verifies against the controller key the log says was in force
// when it was sent, its recorded digest is the digest of its bytes, it is
// for this mesh and node, it chains to the declaration before, and sequences
// rise without repeats. It stops at the first break and names it.
func (h *Handlers) AuditNode(ctx context.Context, r NameRequest) (Audit, error) {
	if err := validName("audit", r.Name); err != nil {
		return Audit{}, err
	}
	if _, found, err := h.Proj.Node(r.Name); err != nil || !found {
		if err == nil {
			err = &aggregates.Error{Op: "audit", ID: r.Name, Err: aggregates.ErrUnknownNode, Detail: "no node of that name is enrolled; see mesh node list"}
		}
		return Audit{}, err
	}
	keys, err := h.keyHistory(ctx)
	if err != nil {
		return Audit{}, err
	}
	idx, err := h.index(r.Name, time.Time{}, time.Time{})
	if err != nil {
		return Audit{}, err
	}
	sends := slices.DeleteFunc(idx, func(e projections.HistoryEntry) bool { return e.Kind != projections.HistoryDeclaration })
	recs, err := h.readDeclarations(ctx, sends)
	if err != nil {
		return Audit{}, err
	}
	a := Audit{Node: r.Name, OK: true, Keys: []string{}}
	for _, k := range keys {
		a.Keys = append(a.Keys, k.key)
	}
	var prevDigest string
	var prevSeq uint64
	for _, rec := range recs {
		sent := rec.sent
		a.Declarations++
		if reason := h.check(sent, keys, rec.seq, r.Name, prevDigest, prevSeq); reason != "" {
			a.OK, a.BreakSeq = false, rec.seq
			a.Break = fmt.Sprintf("event %d (sequence %d): %s", rec.seq, sent.Sequence, reason)
			return a, nil
		}
		prevDigest, prevSeq = sent.Digest, sent.Sequence
	}
	return a, nil
}

// check answers why one declaration breaks the record, or "".
func (h *Handlers) check(sent events.DeclarationSent, keys []keyRecord, seq uint64, node, prevDigest string, prevSeq uint64) string {
	inForce := ""
	for _, k := range keys {
		if k.seq < seq {
			inForce = k.key
		}
	}
	if inForce == "" {
		return "it was sent before any controller key was recorded"
	}
	sealed := declaration.Sealed{Bytes: sent.Declaration, Signature: sent.Signature}
	d, err := declaration.Open(sealed, inForce, h.Mesh, node)
	switch {
	case errors.Is(err, declaration.ErrSignature):
		return fmt.Sprintf("the signature does not verify against %s, the controller key in force", inForce)
	case err != nil:
		return err.Error()
	case compose.Digest(sent.Declaration) != sent.Digest:
		return fmt.Sprintf("its recorded digest %s is not the digest of its bytes", sent.Digest)
	case d.Sequence != sent.Sequence:
		return fmt.Sprintf("the event says sequence %d, the signed bytes %d", sent.Sequence, d.Sequence)
	case d.Sequence <= prevSeq:
		return fmt.Sprintf("its sequence does not rise above %d, the declaration before it", prevSeq)
	case d.Previous != prevDigest:
		return fmt.Sprintf("it chains to %q, but the declaration before it is %q", d.Previous, prevDigest)
	}
	return ""
}

// keyHistory reads every controller key the log recorded, in order.
func (h *Handlers) keyHistory(ctx context.Context) ([]keyRecord, error) {
	var out []keyRecord
	subject := events.ControllerAggregate().Subject(events.ControllerKeyRecorded{}.EventType())
	err := h.Store.Read(ctx, store.ReadOptions{Filter: subject}, func(m store.Msg) error {
		_, ev, err := events.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("event %d: %w", m.Seq, err)
		}
		out = append(out, keyRecord{seq: m.Seq, key: ev.(events.ControllerKeyRecorded).PublicKey})
		return nil
	})
	return out, err
}
