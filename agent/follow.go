package agent

import (
	"encoding/json"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
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

// settled says whether the tries after a wake-up or a reconnect may stop,
// given whether the last read found a declaration new to this agent, the
// number of the declaration read last and the highest number heard
// published. A declaration is heard the moment its publish is routed, and
// the stream stores it a moment later, on its own queue: so a read may
// answer an older declaration this agent had not read (one sent before a
// bus died, say) while the newest is still on its way into the stream.
// Stopping at the first new find then left the agent one behind until its
// next check: two sends heard as one wake-up, or, after a reconnect, a
// send published before the agent's subscription was back (so never heard)
// and stored after its first read (TestAFleetAppliesThroughBusRestarts
// failed about once in twenty runs on it). So the tries stop once the
// agent has read what it heard; after a reconnect, which may have missed
// hearing something, only when the window ends; and always when it ends,
// since a publish the stream refused (a push that lost a race) is heard
// and never stored.
func settled(found bool, read, heard uint64, afterReconnect bool, since time.Duration) bool {
	switch {
	case since > wakeFor:
		return true
	case afterReconnect:
		return false
	case heard == 0:
		// Nothing heard that names a number (the first declaration is
		// on its way, or what woke it was not one): a find settles it.
		return found
	default:
		return read >= heard
	}
}

// heardNumber is the declaration number a message published on a node's
// subject names, 0 when it is not a declaration. Only a hint of what a
// read is owed, never what is applied: what is applied is read back from
// the stream and verified, and a message that lies here costs at most the
// tries of one window.
func heardNumber(data []byte) uint64 {
	var m struct {
		Type string `json:"type"`
		Data struct {
			Sequence uint64 `json:"sequence"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &m) != nil || m.Type != (events.DeclarationSent{}).EventType() {
		return 0
	}
	return m.Data.Sequence
}
