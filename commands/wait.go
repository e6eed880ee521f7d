package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
)

// ErrStillConverging: the wait ended before the node reported on the digest.
var ErrStillConverging = errors.New("no report yet")

// WaitReport waits for node's report on exactly digest, reading the node's
// reports from the stream from sequence from (the DeclarationSent's), so a
// report that came before the wait began is not missed. Applied answers nil;
// failed or refused answer the node's reason at once; the end of the wait
// answers ErrStillConverging in a sentence saying so (rule 12).
func WaitReport(ctx context.Context, st *store.Store, node, digest string, from uint64, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	errFound := errors.New("found")
	var verdict error
	err := st.Read(ctx, store.ReadOptions{From: from, Follow: true, Filter: events.ReportFilter(node)}, func(m store.Msg) error {
		_, ev, err := events.DecodeFromSubject(m.Subject, m.Data)
		if err != nil {
			return nil // not ours to judge here; the fold reports it
		}
		switch r := ev.(type) {
		case events.DeclarationApplied:
			if r.Digest == digest {
				return errFound
			}
		case events.DeclarationFailed:
			if r.Digest == digest {
				var parts []string
				for _, f := range r.Failed {
					parts = append(parts, f.Path+": "+f.Reason)
				}
				verdict = fmt.Errorf("%s failed sequence %d: %s", node, r.Sequence, strings.Join(parts, "; "))
				return errFound
			}
		case events.DeclarationRefused:
			if r.Digest == digest {
				verdict = fmt.Errorf("%s refused sequence %d: %s", node, r.Sequence, r.Reason)
				return errFound
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return verdict
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s has not reported on digest %s within %s; it may still be converging (is its agent running? mesh node show %s says what it last reported)",
			ErrStillConverging, node, digest[:12], wait, node)
	}
	return err
}
