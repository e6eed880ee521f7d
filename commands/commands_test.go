package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Concurrent enrolls of one name through two controllers on one stream: one
// winner, and every other caller is told the name is taken.
func TestConcurrentEnrollsOneWinnerAcrossControllers(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	// Controllers sharing a stream share its signing key.
	first, second := t.TempDir(), t.TempDir()
	clients := []*client.Client{controllerIn(t, srv, first)}
	key, err := os.ReadFile(filepath.Join(first, commands.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(second, commands.KeyFile), key, 0o600)
	clients = append(clients, controllerIn(t, srv, second))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins int
	var taken int
	for i := range 16 {
		wg.Go(func() {
			_, err := enroll(clients[i%2], "web-1", "linux")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case code(err) == wire.CodeConflict && strings.Contains(err.Error(), "taken"):
				taken++
			default:
				t.Errorf("enroll %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || taken != 15 {
		t.Fatalf("%d winners, %d told taken; want 1 and 15", wins, taken)
	}
}

func TestEnrollListShowRetire(t *testing.T) {
	t.Parallel()
	c := controller(t, embeddedtest.Server(t))
	ctx := context.Background()
	got, err := enroll(c, "web-1", "linux")
	if err != nil || !got.Changed || got.Node.Name != "web-1" || got.Seq == 0 {
		t.Fatalf("enroll: %+v %v", got, err)
	}
	// Read your own write: the list right after the enroll holds it.
	var list wire.NodeList
	if err := c.Call(ctx, wire.SubjectNodeList, wire.Empty{}, &list); err != nil || len(list.Nodes) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	var retired wire.Changed
	req := wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "web-1"}
	if err := c.Call(ctx, wire.SubjectNodeRetire, req, &retired); err != nil || !retired.Changed || !retired.Node.Retired {
		t.Fatalf("retire: %+v %v", retired, err)
	}
	req.CommandID = wire.NewCommandID()
	if err := c.Call(ctx, wire.SubjectNodeRetire, req, &retired); err != nil || retired.Changed {
		t.Fatalf("retire again must be nothing to do: %+v %v", retired, err)
	}
	if _, err := enroll(c, "web-1"); code(err) != wire.CodeConflict {
		t.Fatalf("re-enrolling a retired name: %v", err)
	}
	var show wire.NodeView
	if err := c.Call(ctx, wire.SubjectNodeShow, wire.NameRequest{Name: "web-2"}, &show); code(err) != wire.CodeNotFound {
		t.Fatalf("show unknown: %v", err)
	}
	if _, err := enroll(c, "Web.1"); code(err) != wire.CodeBadRequest || !strings.Contains(err.Error(), "lowercase") {
		t.Fatalf("invalid name: %v", err)
	}
}

func TestNoControllerIsSaidQuickly(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	c := &client.Client{NC: embeddedtest.Conn(t, srv), Where: srv.ClientURL()}
	_, err := enroll(c, "web-1")
	if !errors.Is(err, client.ErrNoController) || !strings.Contains(err.Error(), srv.ClientURL()) || !strings.Contains(err.Error(), "mesh up") {
		t.Fatalf("no controller: %v", err)
	}
}

// The controller is a micro service: discovery finds it by name.
func TestControllerIsDiscoverable(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	controller(t, srv)
	nc := embeddedtest.Conn(t, srv)
	msg, err := nc.Request("$SRV.PING."+wire.ServiceName, nil, 2*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), wire.ServiceName) {
		t.Fatalf("ping: %v %s", err, msgData(msg))
	}
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("%s", m.Data)
}

// Answers about thousands of nodes are larger than one NATS message may be
// (1 MiB by default): push, status and node list still answer, whole.
func TestLargeAnswersArriveWhole(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	if _, _, err := store.Open(ctx, nc, store.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	// The controller's key first: the enrolments are its events, MAC'd.
	home := t.TempDir()
	kp, err := busauth.HomeKey(home, true)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := declaration.NewKeyring(kp)
	js, _ := jetstream.New(nc)
	const nodes = 9000 // over 1 MiB of push results, and more of status
	for i := range nodes {
		if i%1000 == 0 {
			// At most a thousand awaiting their acknowledgement: past the
			// client's 4,000 a publish waits 200 ms, then fails, and on a
			// loaded box the bus's acknowledgements are that slow.
			<-js.PublishAsyncComplete()
		}
		name := fmt.Sprintf("web-%d", i)
		m := nats.NewMsg(events.NodeAggregate(name).Subject("NodeEnrolled"))
		m.Data, _ = events.Encode(events.NodeAggregate(name), "c"+name, "", 0, time.Now(), events.NodeEnrolled{Name: name})
		m.Header.Set(events.MACHeader, declaration.MAC(keys.LogMAC(), m.Subject, m.Data))
		if _, err := js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	c := controllerIn(t, srv, home)
	c.Timeout = time.Minute
	var r wire.PushReply
	if err := c.Call(ctx, wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID()}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Considered != nodes || len(r.Sent) != nodes {
		t.Fatalf("push: considered %d, sent %d", r.Considered, len(r.Sent))
	}
	var s wire.StatusReport
	if err := c.Call(ctx, wire.SubjectStatus, wire.StatusRequest{}, &s); err != nil || len(s.Nodes) != nodes {
		t.Fatalf("status: %v, %d nodes", err, len(s.Nodes))
	}
	var l wire.NodeList
	if err := c.Call(ctx, wire.SubjectNodeList, wire.Empty{}, &l); err != nil || len(l.Nodes) != nodes {
		t.Fatalf("node list: %v, %d nodes", err, len(l.Nodes))
	}
}

// The micro service's stats tell the truth (issue 16): a refused request is
// counted as an error, and a verb's processing time is the time it took to
// answer, not the time it took to hand the request to a goroutine. Fails
// when the handler answers after micro has measured it.
func TestServiceStatsTellTheTruth(t *testing.T) {
	t.Parallel()
	srv := embeddedtest.Server(t)
	c := controller(t, srv)
	if _, err := enroll(c, "Not A Name"); err == nil {
		t.Fatal("an invalid name was enrolled")
	}
	for i := range 20 {
		if _, err := enroll(c, fmt.Sprintf("n-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var rebuilt wire.RebuildReply
	if err := c.Call(context.Background(), wire.SubjectProjectionsRebuild, wire.FoldRequest{}, &rebuilt); err != nil {
		t.Fatal(err)
	}
	msg, err := c.NC.Request("$SRV.STATS."+wire.ServiceName, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, e := range stats.Endpoints {
		switch e.Name {
		case "node-enroll":
			if e.NumRequests != 21 || e.NumErrors != 1 {
				t.Errorf("node-enroll: %d requests, %d errors; want 21 and 1", e.NumRequests, e.NumErrors)
			}
		case "projections-rebuild":
			if e.ProcessingTime < time.Millisecond {
				t.Errorf("a rebuild was measured at %s", e.ProcessingTime)
			}
		}
	}
}

// A refusal's kind survives the bus (issue 19): the client's error is of
// the kind the controller's was, so one refusal exits one way whichever
// side made it. Fails when the kind is not sent, or not given back.
func TestARefusalsKindSurvivesTheBus(t *testing.T) {
	t.Parallel()
	c := controller(t, embeddedtest.Server(t))
	if _, err := enroll(c, "web-1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind error
	}{{"web-1", aggregates.ErrNameTaken}, {"Web_1", aggregates.ErrInvalid}} {
		_, err := enroll(c, tc.name)
		var remote *client.RemoteError
		if !errors.As(err, &remote) || !errors.Is(err, tc.kind) {
			t.Fatalf("enrolling %q over the bus: %v (kind %q), want %v", tc.name, err, remote.Kind, tc.kind)
		}
	}
}
