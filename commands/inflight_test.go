package commands_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Every endpoint keeps where each request it took stands, named by the
// inbox its client gave for the pieces of its answer, and the weakest
// operator may ask it on a closed bus: answered once answered, and unknown
// for a request no controller took (wire.Inflight; the client's half is
// client/answerlost_test.go).
func TestTheControllerSaysWhichRequestsItAnswered(t *testing.T) {
	t.Parallel() // its own bus and home: beside the others
	m := newClosedMesh(t, 0)
	o := m.addOperator("vera", events.RoleViewer)
	status := nats.NewMsg(wire.CallerSubject(o.pub, wire.SubjectStatus))
	status.Header.Set(wire.ChunksToHeader, wire.OperatorInbox(o.pub)+".pieces-1")
	if _, err := o.nc.RequestMsg(status, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]wire.RequestStage{
		wire.OperatorInbox(o.pub) + ".pieces-1": wire.RequestAnswered,
		wire.OperatorInbox(o.pub) + ".pieces-2": wire.RequestUnknown,
	} {
		data, _ := json.Marshal(wire.RequestStateRequest{Request: id})
		msg, err := o.nc.Request(wire.CallerSubject(o.pub, wire.SubjectRequestState), data, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var st wire.RequestState
		if err := json.Unmarshal(msg.Data, &st); err != nil || st.Stage != want {
			t.Errorf("where %s stands: %q (%v), want %q", id, msg.Data, err, want)
		}
	}
}
