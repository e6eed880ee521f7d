package agent_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// Issue 34 point 2: an agent applies each declaration as the stream
// republishes it once stored (events.StoredPrefix), and asks the bus
// nothing for it: no direct get of its declaration after its first read.
// That get, a request and its answer, was most of what a real agent cost
// the bus beyond a simulated one. The agent checks only once an hour
// here, so a republish it did not hear would leave it behind past the
// test's bound, and one it heard and read again would be counted.
func TestAnAgentAppliesWhatTheStreamRepublishedWithoutAskingForIt(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.Enroll("web-1", "linux")
	m.Register("motd.json")
	m.AgentWith("web-1", filepath.Join(t.TempDir(), "root"), func(c *agent.Config) { c.CheckEvery = time.Hour })
	m.Assign("web-1", "motd", nil)
	first := m.Push("web-1")
	if rep := m.Report("web-1", first.Sent[0].Digest); rep.Outcome != events.OutcomeApplied {
		t.Fatalf("the first declaration: %+v", rep)
	}
	// Every direct get of web-1's declarations from now on.
	spy := embeddedtest.Conn(t, m.Srv)
	var gets atomic.Int32
	if _, err := spy.Subscribe("$JS.API.DIRECT.GET."+events.Stream+"."+events.DeclarationSubject("web-1"), func(*nats.Msg) { gets.Add(1) }); err != nil {
		t.Fatal(err)
	}
	m.Must(spy.Flush())
	for _, message := range []string{"two", "three"} {
		m.Assign("web-1", "motd", map[string]string{"message": message})
		r := m.Push("web-1")
		if rep := m.Report("web-1", r.Sent[0].Digest); rep.Outcome != events.OutcomeApplied {
			t.Fatalf("declaration %q: %+v", message, rep)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Fatalf("the agent read its declaration by direct get %d time(s) after following: it should apply what the stream republished", n)
	}
}
