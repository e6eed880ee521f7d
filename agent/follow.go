package agent

import (
	"time"

	"github.com/meshctl/mesh/compose"
)

// How Run follows its declarations between reads, and what an apply asks
// of the supervisor: the bounds of its retries and the types it passes.

// maxFailRetry is the longest wait between reads that failed: the bus is
// back within it of its return, at the cost of one small request an agent
// every few seconds while it is away.
const maxFailRetry = 5 * time.Second

// After a wake-up, how soon a read that found nothing new is tried again,
// the longest wait between such tries, and how long after the wake-up
// they go on. Bounded: a publish the stream refused (a push that lost a
// race) wakes the agent too, and then nothing new ever arrives; about
// twenty small reads. Not less: the wake-up is the publish itself, heard
// before the stream stores it, and a bus busy with a restart's
// reconnections stored it over a second later; agents that stopped
// trying after 1.3 s stayed behind until their next check (23 of 60 in
// one run of TestAFleetAppliesThroughBusRestarts, whose agents check once
// an hour).
const (
	wakeRetry    = 5 * time.Millisecond
	maxWakeRetry = 640 * time.Millisecond
	wakeFor      = 10 * time.Second
)

// applied is what an apply asks of the supervisor: the programs of the
// declaration, the modules of which a resource changed (restarted), and
// those of which a resource failed (held as they are: neither started nor
// restarted on a config that did not land).
type applied struct {
	runs    []compose.Runtime
	changed map[string]bool
	hold    map[string]bool
	seq     uint64
}

// waitingForKeys is a declaration not applied yet because no controller
// gave its files' content keys: not a failure of the agent's, which keeps
// following and asks again.
type waitingForKeys struct{ err error }

func (w *waitingForKeys) Error() string { return w.err.Error() }
func (w *waitingForKeys) Unwrap() error { return w.err }
