package agent

import (
	"context"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
)

// beat says the agent is alive on its node's liveness subject every
// LiveEvery until ctx ends (issue 28), MAC'd as the node's
// (declaration.Beat): the subject alone proves nothing. A core NATS publish, not an event:
// the controller records only the changes (lost, back). It runs beside the
// declaration loop, not in it, so a long apply is not taken for a dead
// node; an agent whose process died stops beating, which is what the
// controller must learn. A publish while the bus is away is buffered by
// the client and sent on reconnect, or dropped: the next beat is as good.
func (a *Agent) beat(ctx context.Context) {
	subject := events.LivenessSubject(a.cfg.Join.Node)
	nc := a.st.NC()
	key := a.sealing.MAC
	if a.cfg.Join.beat != "" {
		key = []byte(a.cfg.Join.beat)
	}
	t := time.NewTicker(a.cfg.LiveEvery)
	defer t.Stop()
	for {
		_ = nc.Publish(subject, declaration.Beat(key, subject, time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
