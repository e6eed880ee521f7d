package store_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go/jetstream"
)

// What an own read says follows each message it hands on (Msg.Pending):
// never more than will come, since the fold's pipeline holds a message
// that says more follow until the next one comes.

// The last message an own read hands on says nothing follows it when
// nothing does: the fold's pipeline holds a message that says more follow
// until the next comes, and a push waiting for its last send then waits
// for ever. Two ways it said one more: a send read from the stream while
// its acknowledgement was kept counted its own copy in memory, and a
// message read from the stream before the consumer delivered it stayed
// in what the consumer was still to deliver. Either way, a push after a
// controller was killed mid-push hung about one run in twenty
// (TestFaultControllerKilledMidPush).
func TestTheLastMessageReadFromTheStreamSaysNothingFollows(t *testing.T) {
	ctx := context.Background()
	srv, s, versions := oneEnrolled(t)
	// No reader follows: the send's acknowledgement is kept, as it is when
	// it comes while the reader reads the send from the stream.
	pushTo(t, s, versions, 1)
	sendSeq := versions["web-1"]
	if store.Remembered(s) != 1 {
		t.Fatalf("%d sends remembered, want the one appended", store.Remembered(s))
	}
	got, err := store.ReadAhead(ctx, s, sendSeq, sendSeq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != sendSeq || got[0].Known == nil {
		t.Fatalf("read ahead handed on %v, want the send %d, known", seqs(got), sendSeq)
	}
	if got[0].Pending != 0 {
		t.Errorf("a send read from the stream, last in it, says %d follow; its own copy in memory counted", got[0].Pending)
	}
	// A report the consumer would deliver after its last (the enrolment),
	// read from the stream first: the one the consumer had still to
	// deliver was this one.
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, events.ReportSubject("web-1", "DeclarationApplied"), []byte(`{"a report":"its bytes"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err = store.ReadAhead(ctx, s, ack.Sequence, ack.Sequence, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != ack.Sequence {
		t.Fatalf("read ahead handed on %v, want the report %d", seqs(got), ack.Sequence)
	}
	if got[0].Pending != 0 {
		t.Errorf("a report read from the stream before the consumer delivered it, last in it, says %d follow", got[0].Pending)
	}
	// A report whose subject ends as a send's (a stranger's, on an open
	// bus) is one the consumer delivers all the same: its filter names
	// every report.
	ack, err = js.Publish(ctx, events.ReportSubject("web-1", sentType), []byte(`{"a report":"named as a send"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = store.ReadAhead(ctx, s, ack.Sequence, ack.Sequence, 1); err != nil || len(got) != 1 {
		t.Fatalf("read ahead handed on %v (%v), want the report %d", seqs(got), err, ack.Sequence)
	}
	if got[0].Pending != 0 {
		t.Errorf("a report on %s read from the stream first, last in it, says %d follow", got[0].Subject, got[0].Pending)
	}
	// Another writer's send is not one the consumer delivers: what it
	// still has to deliver is still to come.
	ack, err = js.Publish(ctx, events.DeclarationSubject("web-9"), []byte(`{"another writer's":"send"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = store.ReadAhead(ctx, s, ack.Sequence, ack.Sequence, 1); err != nil || len(got) != 1 {
		t.Fatalf("read ahead handed on %v (%v), want the send %d", seqs(got), err, ack.Sequence)
	}
	if got[0].Pending != 1 {
		t.Errorf("another writer's send read from the stream says %d follow, want the consumer's 1 still to come", got[0].Pending)
	}
}

// sentType is the subject's last token of a send.
var sentType = events.DeclarationSent{}.EventType()

// A message below one the consumer delivers, which no filter names, is read
// from the stream and handed on first, saying that the consumer's message
// and what the consumer said comes after it follow; it is not taken off
// what the consumer said. Said short, the fold commits in the middle of a
// run it could have committed once; said long, it waits.
func TestAGapBelowADeliveryIsNotTakenOffWhatFollows(t *testing.T) {
	store.SetOwnGrace(t, time.Hour)
	store.SetOwnTail(t, time.Hour)
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	if _, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "enrol-web-1", enrolled("web-1")); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	// An enrolment under a kind no filter names it by, then two reports.
	for _, subject := range []string{"mesh.ev.seat.web-1.NodeEnrolled", events.ReportSubject("web-1", "DeclarationApplied"),
		events.ReportSubject("web-1", "DeclarationApplied")} {
		if _, err := js.Publish(ctx, subject, []byte(`{"a":"message"}`)); err != nil {
			t.Fatal(err)
		}
	}
	got := followOwn(t, s, 1).upTo(t, 4)
	sameAsTheStream(t, got, theStream(t, s, 1))
	var pending []uint64
	for _, m := range got {
		pending = append(pending, m.Pending)
	}
	// The gap (2) is followed by the report it lies below (3), and by the
	// one the consumer said follows that report.
	if want := []uint64{2, 2, 1, 0}; !slices.Equal(pending, want) {
		t.Errorf("the own read says %v follow each message, want %v", pending, want)
	}
}

// An own read that has handed nothing on for a whole look at the stream's
// end says so (ReadOptions.Idle), so that its reader hands on a message
// held because it said more followed: the fold's pipeline flushes then.
// Fails when the read never says so.
func TestAnOwnReadThatHandsNothingOnSaysSo(t *testing.T) {
	store.SetOwnTail(t, 20*time.Millisecond)
	store.SetOwnGrace(t, time.Hour)
	s := rememberingStore(t, embeddedtest.Conn(t, embeddedtest.Server(t)))
	if _, err := s.Append(context.Background(), events.NodeAggregate("web-1"), 0, "enrol-web-1", enrolled("web-1")); err != nil {
		t.Fatal(err)
	}
	var idle atomic.Int64
	followOwnAsked(t, s, store.ReadOptions{From: 1, Idle: func() { idle.Add(1) }}).upTo(t, 1)
	embeddedtest.Eventually(t, "the own read to say it handed nothing on", func() bool { return idle.Load() > 0 })
	// Whatever its consumer said is still to come (a count too high is
	// the case it is for), and only when it handed nothing on since its
	// last look: a read that moves is not idle.
	for _, c := range []struct {
		behind uint64
		moved  bool
		want   bool
	}{{3, false, true}, {0, false, true}, {3, true, false}, {0, true, false}} {
		said, err := store.IdleAt(context.Background(), s, 2, c.behind, c.moved)
		if err != nil || said != c.want {
			t.Errorf("an own read %d behind its consumer, moved %v, said it was idle: %v (%v), want %v", c.behind, c.moved, said, err, c.want)
		}
	}
}
