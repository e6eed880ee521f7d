package store

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// Whether an append landed is answered from the aggregate's last event;
// when that cannot be read (the bus gone again), the answer is that it
// cannot tell, never that another writer's event is there: taken for a
// conflict, a send the stream held was composed and sent a second time.
// Fails when a read that failed answers "not ours".
func TestLandedCannotTellWithoutTheBus(t *testing.T) {
	ctx := events.WithBy(context.Background(), "alice")
	nc, cut := embeddedtest.ConnCut(t, embeddedtest.Server(t))
	s, agg, seq := enrolN1(ctx, t, nc, StreamConfig{})
	got, ours, err := s.landed(ctx, agg, events.EventID("enrol-n1", 0))
	if err != nil || !ours || got != seq {
		t.Fatalf("with the bus: landed %d, ours %v, %v; want %d, ours", got, ours, err, seq)
	}
	if _, ours, err := s.landed(ctx, agg, events.EventID("another", 0)); err != nil || ours {
		t.Fatalf("another command's id: ours %v, %v; want not ours", ours, err)
	}
	if got, ours, err := s.landed(ctx, events.NodeAggregate("n2"), events.EventID("enrol-n2", 0)); err != nil || ours || got != 0 {
		t.Fatalf("an aggregate with no event: %d, ours %v, %v; want nothing there, not ours", got, ours, err)
	}
	cut.Drop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, ours, err = s.landed(short, agg, events.EventID("enrol-n1", 0))
	if !errors.Is(err, ErrUnsure) || ours || errors.Is(err, ErrConflict) {
		t.Fatalf("without the bus: ours %v, %v; want that it cannot tell", ours, err)
	}
	if !strings.Contains(err.Error(), "cannot tell whether the append landed: its expectation on node/n1") {
		t.Errorf("without the bus: %v, which does not say it cannot tell", err)
	}
}

// Whether an append landed is read from the stream's leader: a direct get
// may be answered by a replica behind it, whose older event on the
// aggregate reads as another writer's, and the send the stream holds is
// answered a conflict and sent again. On a 3-server cluster, a store
// connected to a follower asks; fails when landed reads by a direct get.
func TestLandedAsksTheStreamsLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	ctx := events.WithBy(context.Background(), "alice")
	servers := embeddedtest.Cluster(t, 3)
	s, agg, seq := enrolN1(ctx, t, embeddedtest.Conn(t, servers[0]), StreamConfig{Replicas: 3})
	info, err := s.stream.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("the stream's leader: %+v, %v", info, err)
	}
	var follower *embedded.Server
	for _, srv := range servers {
		if srv.Name() != info.Cluster.Leader {
			follower = srv
		}
	}
	fs, _, err := Open(ctx, embeddedtest.Conn(t, follower), StreamConfig{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	var direct, leader atomic.Int32
	watch := embeddedtest.Conn(t, follower)
	for subject, n := range map[string]*atomic.Int32{"$JS.API.DIRECT.GET.>": &direct, "$JS.API.STREAM.MSG.GET.>": &leader} {
		if _, err := watch.Subscribe(subject, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	got, ours, err := fs.landed(ctx, agg, events.EventID("enrol-n1", 0))
	if err != nil || !ours || got != seq {
		t.Fatalf("landed %d, ours %v, %v; want %d, ours", got, ours, err, seq)
	}
	embeddedtest.Eventually(t, "the watcher to hear the read", func() bool { return direct.Load()+leader.Load() > 0 })
	if direct.Load() != 0 || leader.Load() != 1 {
		t.Fatalf("landed asked %d direct get(s) and the leader %d time(s); want the leader once", direct.Load(), leader.Load())
	}
}

// enrolN1 opens a store on nc and appends node n1's enrolment, command
// enrol-n1, at the sequence it returns.
func enrolN1(ctx context.Context, t *testing.T, nc *nats.Conn, cfg StreamConfig) (*Store, events.AggregateID, uint64) {
	t.Helper()
	s, _, err := Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	agg := events.NodeAggregate("n1")
	seq, err := s.Append(ctx, agg, 0, "enrol-n1", events.NodeEnrolled{Name: "n1", Capabilities: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	return s, agg, seq
}
