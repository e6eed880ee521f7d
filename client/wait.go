package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

// WaitReport is here, not in commands, because only those who asked a
// controller for a push wait on its reports: the command line (push
// --wait, rotate --wait) and the tests.

// ErrStillConverging: the wait ended before the node reported on the digest.
var ErrStillConverging = errors.New("no report yet")

// WaitReport waits for node's report on exactly digest, reading the node's
// reports from the stream from sequence from (the DeclarationSent's), so a
// report that came before the wait began is not missed. A report it finds
// counts only once judge says the fold took it as a fact (a report the
// fold set aside as foreign is passed over, and named if the wait ends).
// Applied answers nil; failed or refused answer the node's reason at once;
// the end of the wait answers ErrStillConverging in a sentence saying so
// (rule 12).
func WaitReport(ctx context.Context, st *store.Store, judge Judge, node, digest string, from uint64, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	errFound := errors.New("found")
	var verdict error
	var setAside *wire.Judgement
	err := st.Read(ctx, store.ReadOptions{From: from, Follow: true, Filter: events.ReportFilter(node)}, func(m store.Msg) error {
		_, ev, err := events.DecodeFromSubject(m.Subject, m.Data)
		if err != nil {
			return nil // not ours to judge here; the fold reports it
		}
		if !onDigest(ev, digest) {
			return nil
		}
		j, err := judge.Judge(ctx, m.Seq)
		if err != nil {
			return fmt.Errorf("cannot tell whether the report at event %d is %s's word: %w", m.Seq, node, err)
		}
		if j.Foreign {
			setAside = &j
			return nil
		}
		switch r := ev.(type) {
		case events.DeclarationFailed:
			var parts []string
			for _, f := range r.Failed {
				parts = append(parts, f.Path+": "+f.Reason)
			}
			verdict = fmt.Errorf("%s failed sequence %d: %s", node, r.Sequence, strings.Join(parts, "; "))
		case events.DeclarationRefused:
			verdict = fmt.Errorf("%s refused sequence %d: %s", node, r.Sequence, r.Reason)
		}
		return errFound
	})
	switch {
	case errors.Is(err, errFound):
		return verdict
	case errors.Is(err, context.DeadlineExceeded) && setAside != nil:
		return fmt.Errorf("%w: %s has not reported on digest %s within %s; a report on it at event %d was set aside as foreign (%s): see mesh foreign list",
			ErrStillConverging, node, digest[:12], wait, setAside.Seq, setAside.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s has not reported on digest %s within %s; it may still be converging (is its agent running? mesh node show %s says what it last reported)",
			ErrStillConverging, node, digest[:12], wait, node)
	}
	return err
}

// onDigest says whether ev is a report on the declaration of digest.
func onDigest(ev events.Event, digest string) bool {
	switch r := ev.(type) {
	case events.DeclarationApplied:
		return r.Digest == digest
	case events.DeclarationFailed:
		return r.Digest == digest
	case events.DeclarationRefused:
		return r.Digest == digest
	}
	return false
}

// Judge says how the fold took the message at a stream sequence.
// status.Service is one (in the controller's process); a Client asks
// it over the bus (Client.Judge).
type Judge interface {
	Judge(ctx context.Context, seq uint64) (wire.Judgement, error)
}
