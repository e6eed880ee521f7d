package history

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/fanout"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nkeys"
)

// Rule 20, both directions are proven. Audit reads the log itself (the read
// models only say which messages the fold set aside) and proves, for every
// node, what it was told and what it said back:
//
//   - every declaration's signature verifies against the controller key the
//     log says was in force, its recorded digest is the sha256 of its bytes,
//     it is for this mesh and node, it chains to the one before, and its
//     sequence rises;
//   - every report (applied, failed, refused) verifies against the report
//     key the node recorded before it: a key only the node's agent holds,
//     so these are the node's words, which the controller cannot make;
//   - every foreign message that touches the node is named.
//
// The fold believes a message on a keyed digest (a MAC), which proves its
// writer to the controller only; these signatures prove it to anyone.

// keyRecord is a key and the stream sequence from which it signs.
type keyRecord struct {
	seq uint64
	key string
}

// inForce is the key of the last record before seq, "" for none.
func inForce(keys []keyRecord, seq uint64) string {
	k := ""
	for _, r := range keys {
		if r.seq < seq {
			k = r.key
		}
	}
	return k
}

// auditor walks the log once, in order, and proves what it reads.
type auditor struct {
	h       *Service
	foreign map[uint64]projections.ForeignMessage
	ctrl    []keyRecord
	nodes   map[string]*nodeAudit
	checks  []sigCheck               // signatures to verify, in parallel, a batch at a time
	keys    map[string]nkeys.KeyPair // parsed once for every batch
}

type nodeAudit struct {
	wire.Audit
	reportKeys []keyRecord
	prevDigest string
	prevSeq    uint64
}

// sigCheck is one signature to verify, and whose record it breaks if not.
// why is made only for a check that fails: a sentence per event, made for
// every one, was a sixth of a whole-mesh audit's memory.
type sigCheck struct {
	node, key string
	why       func() string
	seq       uint64
	data, sig []byte
}

// checkBatch is how many signatures an audit gathers before it checks
// them, on every core: gathered for the whole log, they held every
// message's bytes at once (2 GiB at a million events).
const checkBatch = 8192

// Audit proves one node's record (r.Node), or every node's and names every
// foreign message.
func (h *Service) Audit(ctx context.Context, r wire.AuditRequest) (wire.AuditReport, error) {
	start := time.Now()
	a := &auditor{h: h, foreign: map[uint64]projections.ForeignMessage{}, nodes: map[string]*nodeAudit{}, keys: map[string]nkeys.KeyPair{}}
	var all []projections.ForeignMessage
	var nodes []projections.Node
	err := h.Proj.Read(func(v *projections.View) (err error) {
		if all, err = v.Foreign(); err != nil {
			return err
		}
		nodes, err = v.Nodes()
		return err
	})
	if err != nil {
		return wire.AuditReport{}, err
	}
	for _, f := range all {
		a.foreign[f.Seq] = f
	}
	o := store.ReadOptions{}
	if r.Node != "" {
		if err := core.ValidName("audit", r.Node); err != nil {
			return wire.AuditReport{}, err
		}
		if !slices.ContainsFunc(nodes, func(n projections.Node) bool { return n.Name == r.Node }) {
			return wire.AuditReport{}, aggregates.Refuse("audit", r.Node, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
		}
		nodes = []projections.Node{{Name: r.Node}}
		o.Filters = []string{events.ControllerAggregate().Filter(), events.KeysAggregate(r.Node).Filter(), events.DeclarationSubject(r.Node), events.ReportFilter(r.Node)}
	}
	for _, n := range nodes {
		a.nodes[n.Name] = &nodeAudit{Audit: wire.Audit{Node: n.Name, OK: true, Keys: []string{}, ReportKeys: []string{}, Foreign: []projections.ForeignMessage{}}}
	}
	total := uint64(0)
	if st, err := h.Store.State(ctx); err == nil {
		total = st.LastSeq
	}
	progress := h.Progress(r.Progress)
	var read uint64
	err = h.Store.Read(ctx, o, func(m store.Msg) error {
		read++
		if progress != nil {
			progress(projections.Progress{Folded: m.Seq, Total: total, Elapsed: time.Since(start)})
		}
		return a.read(m)
	})
	if err != nil {
		return wire.AuditReport{}, err
	}
	a.verify()
	out := wire.AuditReport{Nodes: []wire.Audit{}, Foreign: []projections.ForeignMessage{}, OK: true, Events: read}
	// A foreign message was never believed, so it breaks no record; until
	// the operator has acknowledged it, the audit does not hold.
	for _, n := range nodes {
		na := a.nodes[n.Name]
		out.OK = out.OK && na.OK && !anyOpen(na.Foreign)
		out.Nodes = append(out.Nodes, na.Audit)
	}
	if r.Node == "" {
		out.Foreign = append(out.Foreign, all...)
	} else {
		out.Foreign = a.nodes[r.Node].Foreign
	}
	out.OK = out.OK && !anyOpen(out.Foreign)
	out.Seconds = time.Since(start).Seconds()
	if out.Seconds > 0 {
		out.Rate = float64(read) / out.Seconds
	}
	out.SignatureRate = signatureRate()
	return out, nil
}

// read takes one message of the walk.
func (a *auditor) read(m store.Msg) error {
	if f, ok := a.foreign[m.Seq]; ok {
		for _, n := range f.Nodes {
			if na := a.nodes[n]; na != nil {
				na.Foreign = append(na.Foreign, f)
			}
		}
		return nil
	}
	env, ev, err := events.Read(m.Subject, m.Data)
	if err != nil {
		// The fold set aside or stopped at every message it could not
		// read; one here it did not is a read model gone wrong.
		if errors.Is(err, events.ErrNewer) {
			return fmt.Errorf("event %d: %w; audit it with a controller that knows it", m.Seq, err)
		}
		return fmt.Errorf("event %d is foreign (%v) but the foreign read model does not hold it; run mesh projections verify", m.Seq, err)
	}
	switch ev := ev.(type) {
	case events.ControllerKeyRecorded:
		a.ctrl = append(a.ctrl, keyRecord{seq: m.Seq, key: ev.PublicKey})
	case events.ReportKeyRecorded:
		if na := a.nodes[ev.Node]; na != nil {
			na.reportKeys = append(na.reportKeys, keyRecord{seq: m.Seq, key: ev.Key})
			if !slices.Contains(na.ReportKeys, ev.Key) {
				na.ReportKeys = append(na.ReportKeys, ev.Key)
			}
			// Possession: the key signed its own record.
			sig, _ := decodeSig(m.Header.Get(events.SignatureHeader))
			a.check(sigCheck{node: na.Node, key: ev.Key, seq: m.Seq, data: m.Data, sig: sig,
				why: func() string { return fmt.Sprintf("the record of report key %s is not signed by that key", ev.Key) }})
		}
	case events.NodeKeysRecorded:
		// Keys its agent made, enrolled with a token (issue 29): the
		// report key among them is in force from here on.
		if na := a.nodes[ev.Node]; na != nil {
			na.reportKeys = append(na.reportKeys, keyRecord{seq: m.Seq, key: ev.Report})
			if !slices.Contains(na.ReportKeys, ev.Report) {
				na.ReportKeys = append(na.ReportKeys, ev.Report)
			}
			na.OwnKeys = true
			if ev.Rekey {
				na.Rekeys = append(na.Rekeys, m.Seq)
			}
		}
	case events.DeclarationSent:
		if na := a.nodes[ev.Node]; na != nil {
			a.declaration(na, m.Seq, ev)
			if env.By != "" {
				if na.AskedBy == nil {
					na.AskedBy = map[string]int{}
				}
				na.AskedBy[env.By]++
			}
		}
	default:
		if events.AgentReport(ev.EventType()) {
			a.agentReport(m, ev)
		}
	}
	return nil
}

// declaration checks one send in the chain of its node.
func (a *auditor) declaration(na *nodeAudit, seq uint64, sent events.DeclarationSent) {
	if !na.OK {
		return
	}
	na.Declarations++
	key := inForce(a.ctrl, seq)
	if key == "" {
		na.breaks(seq, fmt.Sprintf("sequence %d was sent before any controller key was recorded", sent.Sequence))
		return
	}
	if !slices.Contains(na.Keys, key) {
		na.Keys = append(na.Keys, key)
	}
	h, err := declaration.ReadHead(sent.Declaration)
	switch {
	case err != nil:
		na.breaks(seq, err.Error())
	case h.Mesh != a.h.Mesh || h.Node != na.Node:
		na.breaks(seq, fmt.Sprintf("the signed bytes are for %s of mesh %s", h.Node, h.Mesh))
	case compose.Digest(sent.Declaration) != sent.Digest:
		na.breaks(seq, fmt.Sprintf("its recorded digest %s is not the digest of its bytes", sent.Digest))
	case h.Sequence != sent.Sequence:
		na.breaks(seq, fmt.Sprintf("the event says sequence %d, the signed bytes %d", sent.Sequence, h.Sequence))
	case h.Sequence <= na.prevSeq:
		na.breaks(seq, fmt.Sprintf("sequence %d does not rise above %d, the declaration before it", h.Sequence, na.prevSeq))
	case h.Previous != na.prevDigest:
		na.breaks(seq, fmt.Sprintf("sequence %d chains to %q, but the declaration before it is %q", h.Sequence, h.Previous, na.prevDigest))
	default:
		// What the signature covers: the bytes, or the root of the window
		// they were signed in, which their proof leads to.
		msg, err := declaration.SignedMessage(sent.Declaration, sent.Proof)
		if err != nil {
			na.breaks(seq, fmt.Sprintf("sequence %d: %v", sent.Sequence, err))
			break
		}
		a.check(sigCheck{node: na.Node, key: key, seq: seq, data: msg, sig: sent.Signature,
			why: func() string {
				return fmt.Sprintf("sequence %d: the signature does not verify against %s, the controller key in force", sent.Sequence, key)
			}})
	}
	na.prevDigest, na.prevSeq = sent.Digest, sent.Sequence
}

// check gathers one signature to verify, and verifies a full batch.
func (a *auditor) check(c sigCheck) {
	a.checks = append(a.checks, c)
	if len(a.checks) >= checkBatch {
		a.verify()
	}
}

// verify checks the signatures gathered so far, on every core, and breaks
// each node's record at its first bad one (breaks keeps the earliest).
func (a *auditor) verify() {
	keys := a.keys
	for _, c := range a.checks {
		if _, ok := keys[c.key]; !ok {
			keys[c.key], _ = nkeys.FromPublicKey(c.key) // nil: every check by it fails
		}
	}
	// A window's sends share one signed message and signature
	// (declaration.SealMany): each distinct one is checked once.
	first := make([]int, len(a.checks))
	seen := make(map[string]int, len(a.checks))
	for i, c := range a.checks {
		k := c.key + "\x00" + string(c.sig) + string(c.data)
		if j, ok := seen[k]; ok {
			first[i] = j
			continue
		}
		seen[k], first[i] = i, i
	}
	bad := make([]bool, len(a.checks))
	fanout.PerCore(len(a.checks), func(i int) {
		if first[i] != i {
			return
		}
		c := a.checks[i]
		kp := keys[c.key]
		bad[i] = kp == nil || kp.Verify(c.data, c.sig) != nil
	})
	for i, c := range a.checks {
		if bad[first[i]] {
			a.nodes[c.node].breaks(c.seq, c.why())
		}
	}
	clear(a.checks) // let go of the messages' bytes
	a.checks = a.checks[:0]
}

// breaks records the earliest break of a node's record.
func (na *nodeAudit) breaks(seq uint64, why string) {
	if !na.OK && na.BreakSeq < seq {
		return
	}
	na.OK, na.BreakSeq, na.Break = false, seq, fmt.Sprintf("event %d: %s", seq, why)
}

// signatureRate measures this machine's bare ed25519 checks a second, so an
// audit's own rate can be read beside it.
func signatureRate() float64 {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 1024)
	sig := ed25519.Sign(priv, msg)
	const n = 200
	start := time.Now()
	for range n {
		ed25519.Verify(pub, msg, sig)
	}
	return n / time.Since(start).Seconds()
}

func anyOpen(f []projections.ForeignMessage) bool {
	return slices.ContainsFunc(f, func(m projections.ForeignMessage) bool { return m.Acked == 0 })
}

// decodeSig reads a signature header's value.
func decodeSig(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// agentReport checks a report that is the node's agent's word alone
// (events.AgentReport) against the report key in force when it landed.
func (a *auditor) agentReport(m store.Msg, ev events.Event) {
	na := a.nodes[events.Rights[ev.EventType()].Name(ev)]
	if na == nil || !na.OK {
		return
	}
	na.Reports++
	key := inForce(na.reportKeys, m.Seq)
	if key == "" {
		na.breaks(m.Seq, fmt.Sprintf("a %s before the node recorded any report key", ev.EventType()))
		return
	}
	sig, _ := decodeSig(m.Header.Get(events.SignatureHeader))
	a.check(sigCheck{node: na.Node, key: key, seq: m.Seq, data: m.Data, sig: sig,
		why: func() string {
			return fmt.Sprintf("the %s's signature does not verify against %s, the node's report key in force", ev.EventType(), key)
		}})
}
