package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// A 3-server cluster with an R3 stream loses its stream leader in the middle
// of appends: every append that was acknowledged is in the stream afterwards,
// exactly once, and appends carry on against the new leader.
func TestClusterLeaderLossLosesNoAcknowledgedEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	ctx := context.Background()
	servers := embeddedtest.Cluster(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, _, err := store.Open(ctx, nc, store.StreamConfig{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	appendOne := func(i int) {
		name := fmt.Sprintf("n%d", i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			seq, err := s.Append(actx, events.NodeAggregate(name), 0, "enroll-"+name, enrolled(name))
			cancel()
			if err == nil {
				acked[name] = seq
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("append %s never succeeded: %v", name, err)
			}
			// Retry with the same command id: idempotent, so a write whose
			// ack was lost with the leader is not stored twice.
		}
	}
	for i := range 100 {
		appendOne(i)
	}
	leader := streamLeader(t, nc)
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for _, srv := range servers {
			if srv.Name() == leader {
				srv.Close()
			}
		}
	}()
	// The appends go on while the leader shuts down under them.
	for i := 100; i < 200; i++ {
		appendOne(i)
	}
	<-killed
	if newLeader := streamLeader(t, nc); newLeader == leader {
		t.Fatalf("leader %s still leads after being stopped", leader)
	}
	// A new leader answers as soon as it is elected, before it has applied
	// the tail its log holds: a read then ended short of the last appends
	// acknowledged (six of two hundred, once in a loaded stress run). Lost
	// ones would never arrive, and this fails after Settle.
	var last uint64
	for _, seq := range acked {
		last = max(last, seq)
	}
	embeddedtest.Eventually(t, fmt.Sprintf("the stream to hold every acknowledged append, up to %d", last), func() bool {
		st, err := s.State(ctx)
		return err == nil && st.LastSeq >= last
	})

	seen := map[string]uint64{}
	err = s.Read(ctx, store.ReadOptions{}, func(m store.Msg) error {
		env, err := events.DecodeEnvelope(m.Data)
		if err != nil {
			return err
		}
		if prev, dup := seen[env.Aggregate.ID]; dup {
			return fmt.Errorf("%s stored twice, at %d and %d", env.Aggregate.ID, prev, m.Seq)
		}
		seen[env.Aggregate.ID] = m.Seq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, seq := range acked {
		if seen[name] != seq {
			t.Errorf("%s was acknowledged at %d but the stream has it at %d", name, seq, seen[name])
		}
	}
	if len(seen) != 200 {
		t.Fatalf("stream holds %d enrolments, want 200", len(seen))
	}
}

func streamLeader(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	js, _ := nc.JetStream()
	leader := ""
	embeddedtest.Eventually(t, "the stream to have a leader", func() bool {
		info, err := js.StreamInfo(events.Stream)
		if err == nil && info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		return leader != ""
	})
	return leader
}
