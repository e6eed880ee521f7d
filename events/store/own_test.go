package store_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ownRead follows s with Own from from on, collecting what it hands over,
// until the test ends.
type ownRead struct {
	mu   sync.Mutex
	msgs []store.Msg
}

func followOwn(t *testing.T, s *store.Store, from uint64) *ownRead {
	return followOwnAsked(t, s, store.ReadOptions{From: from})
}

func followOwnAsked(t *testing.T, s *store.Store, o store.ReadOptions) *ownRead {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &ownRead{}
	done := make(chan error, 1)
	o.Follow, o.Own = true, true
	go func() {
		done <- s.Read(ctx, o, func(m store.Msg) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.msgs = append(r.msgs, m)
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// upTo waits until the read has handed over seq, and answers what it has.
func (r *ownRead) upTo(t *testing.T, seq uint64) []store.Msg {
	t.Helper()
	embeddedtest.Eventually(t, "the own read to hand over event "+strconv.FormatUint(seq, 10), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.msgs) > 0 && r.msgs[len(r.msgs)-1].Seq >= seq
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// theStream is every message of the stream from from on, as a plain read
// delivers them.
func theStream(t *testing.T, s *store.Store, from uint64) []store.Msg {
	t.Helper()
	var out []store.Msg
	if err := s.Read(context.Background(), store.ReadOptions{From: from}, func(m store.Msg) error {
		out = append(out, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameAsTheStream fails unless got is the stream from its first sequence
// on, message for message, in order, each once.
func sameAsTheStream(t *testing.T, got, want []store.Msg) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the own read handed over %d message(s), the stream holds %d: %v", len(got), len(want), seqs(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Subject != w.Subject || string(g.Data) != string(w.Data) {
			t.Fatalf("message %d of the own read is %d on %s, the stream's is %d on %s", i, g.Seq, g.Subject, w.Seq, w.Subject)
		}
		if mac := w.Header.Get(events.MACHeader); g.Header.Get(events.MACHeader) != mac {
			t.Fatalf("event %d handed over with MAC %q, stored with %q", g.Seq, g.Header.Get(events.MACHeader), mac)
		}
	}
}

func seqs(ms []store.Msg) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.Seq)
	}
	return out
}

func sent(node string, n int) events.DeclarationSent {
	return events.DeclarationSent{Node: node, Sequence: uint64(n), Digest: "ab12", ContentDigest: "cd34", By: "push", Resources: 1,
		Declaration: []byte("signed bytes of " + node), Signature: []byte{1, 2, 3}, Key: "UCONTROLLER"}
}

// rememberingStore is the controller's store: it MACs its appends and
// remembers its sends, and stamps them at a time no server would.
func rememberingStore(t *testing.T, nc *nats.Conn) *store.Store {
	s := open(t, nc)
	s.MAC = []byte("the log's MAC key, 32 bytes long")
	s.RememberSends = true
	s.Now = func() time.Time { return ownStamp }
	return s
}

var ownStamp = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// pushTo appends one send to each node as a push does, expecting each
// node's version, and answers the new versions.
func pushTo(t *testing.T, s *store.Store, versions map[string]uint64, round int) {
	t.Helper()
	var items []store.One
	nodes := slices.Sorted(func(yield func(string) bool) {
		for n := range versions {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range nodes {
		items = append(items, store.One{Aggregate: events.NodeAggregate(n), Expected: versions[n], CommandID: "push-" + strconv.Itoa(round) + "-" + n, Event: sent(n, round)})
	}
	out, err := s.AppendMany(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		versions[nodes[i]] = o.Seq
	}
}

// oneEnrolled is a controller's store with web-1 enrolled, and web-1's
// version, for a test of gaps: a short grace, and no look at the stream's
// end within the test (it would find a gap too, and hide which path did).
func oneEnrolled(t *testing.T) (*embedded.Server, *store.Store, map[string]uint64) {
	t.Helper()
	store.SetOwnGrace(t, 20*time.Millisecond)
	store.SetOwnTail(t, time.Hour)
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	v, err := s.Append(context.Background(), events.NodeAggregate("web-1"), 0, "enrol-web-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	return srv, s, map[string]uint64{"web-1": v}
}

// The live fold's read hands over the stream as it is, in order, each
// message once; the sends its own store appended come from memory, and
// the bus delivers only the rest (issue 34: a delivery a pushed node
// fewer). Without the consumer's filters every send is delivered twice
// over; without the memory every send is missing.
func TestTheOwnReadTakesItsSendsFromMemoryAndTheRestFromTheBus(t *testing.T) {
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	versions := map[string]uint64{}
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		v, err := s.Append(ctx, events.NodeAggregate(n), 0, "enrol-"+n, enrolled(n))
		if err != nil {
			t.Fatal(err)
		}
		versions[n] = v
	}
	r := followOwn(t, s, 1)
	pushTo(t, s, versions, 1)
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.ReportSubject("web-2", "DeclarationApplied"), []byte(`{"a report":"its bytes"}`)); err != nil {
		t.Fatal(err)
	}
	pushTo(t, s, versions, 2)
	last := versions["web-3"]
	got := r.upTo(t, last)
	sameAsTheStream(t, got, theStream(t, s, 1))
	var fromMemory, sends int
	for _, m := range got {
		isSend := strings.HasSuffix(m.Subject, ".DeclarationSent")
		if isSend {
			sends++
		}
		if m.Time.Equal(ownStamp) {
			fromMemory++
			if !isSend || m.Known == nil {
				t.Errorf("event %d on %s came from memory; only a send this store appended may", m.Seq, m.Subject)
			}
		}
	}
	if sends != 6 || fromMemory != 6 {
		t.Errorf("%d of %d sends came from memory, want all 6", fromMemory, sends)
	}
	if n := store.Remembered(s); n != 0 {
		t.Errorf("%d sends still remembered once read, want none", n)
	}
	// What the bus delivered: the enrolments and the report, never a send.
	delivered := consumerDelivered(t, js)
	if want := uint64(len(got) - sends); delivered != want {
		t.Errorf("the bus delivered %d message(s) to the own read, want %d (every one but the sends)", delivered, want)
	}
}

// consumerDelivered is how many messages the stream's one filtered consumer
// (the own read's) has delivered.
func consumerDelivered(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	var delivered uint64
	found := 0
	for info := range st.ListConsumers(context.Background()).Info() {
		if len(info.Config.FilterSubjects) > 0 {
			found++
			delivered = info.Delivered.Consumer
		}
	}
	if found != 1 {
		t.Fatalf("%d filtered consumers on the stream, want the own read's one", found)
	}
	return delivered
}

// What the consumer leaves out and memory does not hold is read from the
// stream, in its place: another writer's send (both before a delivered
// message, and last, behind a send of this store's, where no delivery
// closes the gap), and a message of a type no filter names. Without the
// fill the read hands over a hole; without the grace it waits (the look
// at the stream's end, which would also find it, is put off past the test).
func TestTheOwnReadFillsWhatNeitherMemoryNorTheConsumerHolds(t *testing.T) {
	srv, s, versions := oneEnrolled(t)
	ctx := context.Background()
	r := followOwn(t, s, 1)
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	other := func(subject string) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, subject, []byte(`{"another writer":"`+subject+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	// Another writer's send, then this store's: the read is held behind
	// a sequence nobody delivers until the grace reads it.
	other(events.DeclarationSubject("web-9"))
	pushTo(t, s, versions, 1)
	sameAsTheStream(t, r.upTo(t, versions["web-1"]), theStream(t, s, 1))
	// A type no filter names, another writer's send, then a report the
	// consumer delivers: both read before it.
	other(events.NodeAggregate("web-7").Subject("NotAnEventType"))
	other(events.DeclarationSubject("web-8"))
	last := other(events.ReportSubject("web-1", "DeclarationApplied"))
	sameAsTheStream(t, r.upTo(t, last), theStream(t, s, 1))
	// And this store's sends after it still come from memory.
	pushTo(t, s, versions, 2)
	got := r.upTo(t, versions["web-1"])
	sameAsTheStream(t, got, theStream(t, s, 1))
	if m := got[len(got)-1]; !m.Time.Equal(ownStamp) || m.Known == nil {
		t.Errorf("event %d, this store's send, was not taken from memory", m.Seq)
	}
}

// A read that starts again from a checkpoint hands over nothing before it,
// though memory still holds sends there that no read took (a fold that
// failed to commit reads them again, from the stream, by its checkpoint).
func TestAnOwnReadFromACheckpointSkipsWhatMemoryHeldBeforeIt(t *testing.T) {
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	versions := map[string]uint64{}
	for _, n := range []string{"web-1", "web-2"} {
		v, err := s.Append(ctx, events.NodeAggregate(n), 0, "enrol-"+n, enrolled(n))
		if err != nil {
			t.Fatal(err)
		}
		versions[n] = v
	}
	pushTo(t, s, versions, 1)     // kept: no read takes them yet
	from := versions["web-1"] + 1 // web-1's send before it, web-2's at it
	r := followOwn(t, s, from)
	pushTo(t, s, versions, 2)
	got := r.upTo(t, versions["web-2"])
	sameAsTheStream(t, got, theStream(t, s, from))
	if n := store.Remembered(s); n != 0 {
		t.Errorf("%d sends still remembered, want none: those before the checkpoint are dropped, the rest read", n)
	}
}

// A message the consumer leaves out and memory does not hold, last in the
// stream, is read once someone waits for it: nothing delivered after it
// would close the gap, and the engine's WaitFor (its Wanted and Asked)
// says so, at once. Without that a read of the log to its end waits (the
// grace and the look at the stream's end, which would also find it, are
// put off past the test).
func TestAnOwnReadReadsWhatAWaiterWantsThatNoConsumerDelivers(t *testing.T) {
	store.SetOwnGrace(t, time.Hour)
	store.SetOwnTail(t, time.Hour)
	var wanted atomic.Uint64
	wanted.Store(math.MaxUint64)
	asked := make(chan struct{}, 1)
	readPastAnotherWritersSend(t, store.ReadOptions{From: 1, Wanted: wanted.Load, Asked: asked}, func(seq uint64) {
		wanted.Store(seq)
		asked <- struct{}{}
	})
}

// With nobody waiting, a message the consumer leaves out and memory does
// not hold, last in the stream, is still read: once the reader has had
// nothing to hand on for ownTail (a reply aimed at a declaration subject
// is such a message, and the fold must list it foreign). Without the look
// at the stream's end it waits for the next message delivered.
func TestAnIdleOwnReadReadsWhatTheConsumerLeftOutLast(t *testing.T) {
	store.SetOwnTail(t, 20*time.Millisecond)
	store.SetOwnGrace(t, time.Hour)
	readPastAnotherWritersSend(t, store.ReadOptions{From: 1}, func(uint64) {})
}

// readPastAnotherWritersSend follows an own read with o past an enrolment,
// then puts another writer's send last in the stream, tells wait its
// sequence, and fails unless the read hands it over in its place.
func readPastAnotherWritersSend(t *testing.T, o store.ReadOptions, wait func(seq uint64)) {
	t.Helper()
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	if _, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "enrol-web-1", enrolled("web-1")); err != nil {
		t.Fatal(err)
	}
	r := followOwnAsked(t, s, o)
	r.upTo(t, 1)
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, events.DeclarationSubject("web-9"), []byte(`{"another writer's":"send"}`))
	if err != nil {
		t.Fatal(err)
	}
	wait(ack.Sequence)
	sameAsTheStream(t, r.upTo(t, ack.Sequence), theStream(t, s, 1))
}

// Two appends under one Msg-Id at once (a command run twice at the same
// moment) are two messages, of which the stream stores one: the read hands
// over the one stored, never the other's bytes at its sequence. Without
// the acknowledgement matched to its own message, most rounds fold the
// wrong writer's send.
func TestTwoAppendsUnderOneIDHandOverTheOneStored(t *testing.T) {
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	r := followOwn(t, s, 1)
	for round := range 20 {
		node := "web-" + strconv.Itoa(round)
		v, err := s.Append(ctx, events.NodeAggregate(node), 0, "enrol-"+node, enrolled(node))
		if err != nil {
			t.Fatal(err)
		}
		item := []store.One{{Aggregate: events.NodeAggregate(node), Expected: v, CommandID: "push-" + node, Event: sent(node, 1)}}
		var wg sync.WaitGroup
		for _, by := range []string{"alice", "bob"} {
			wg.Go(func() {
				// One lands; the other is a duplicate or a conflict.
				s.AppendMany(events.WithBy(ctx, by), item)
			})
		}
		wg.Wait()
	}
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameAsTheStream(t, r.upTo(t, st.LastSeq), theStream(t, s, 1))
}

// Past what a store remembers whole, its sends are remembered bare (only
// that they are its own) and read from the stream in their place, at once:
// the read is the stream still. Without them a send past the bound is one
// the read waits out its grace for (put off past the test here).
func TestSendsPastTheBoundAreReadFromTheStream(t *testing.T) {
	store.SetRememberAppends(t, 2)
	store.SetOwnGrace(t, time.Hour)
	store.SetOwnTail(t, time.Hour)
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	versions := map[string]uint64{}
	for i := range 6 {
		n := "web-" + strconv.Itoa(i)
		v, err := s.Append(ctx, events.NodeAggregate(n), 0, "enrol-"+n, enrolled(n))
		if err != nil {
			t.Fatal(err)
		}
		versions[n] = v
	}
	pushTo(t, s, versions, 1) // six sends, two kept whole, four bare; no read yet
	r := followOwn(t, s, 1)
	last := uint64(0)
	for _, v := range versions {
		last = max(last, v)
	}
	got := r.upTo(t, last)
	sameAsTheStream(t, got, theStream(t, s, 1))
	fromMemory := 0
	for _, m := range got {
		if m.Time.Equal(ownStamp) {
			fromMemory++
		}
	}
	if fromMemory != 2 {
		t.Errorf("%d sends came from memory, want the 2 kept whole", fromMemory)
	}
}

// A retry of a landed append (the same command id; other bytes, here
// another writer's name, as a retry's time would differ) stores nothing:
// the read hands over the first at its sequence, never the retry's bytes.
// (The stream answers it as a conflict the store settles as landed; a
// retry it answers as a duplicate, which stored's Duplicate check is for,
// needs the first's ack lost and is not made here.)
func TestARetryOfALandedAppendHandsOverTheFirst(t *testing.T) {
	srv := embeddedtest.Server(t)
	s := rememberingStore(t, embeddedtest.Conn(t, srv))
	ctx := context.Background()
	v, err := s.Append(ctx, events.NodeAggregate("web-1"), 0, "enrol-web-1", enrolled("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	item := []store.One{{Aggregate: events.NodeAggregate("web-1"), Expected: v, CommandID: "push-web-1", Event: sent("web-1", 1)}}
	var seqs []uint64
	for _, by := range []string{"alice", "bob"} {
		out, err := s.AppendMany(events.WithBy(ctx, by), item)
		if err != nil || out[0].Err != nil {
			t.Fatal(err, out)
		}
		seqs = append(seqs, out[0].Seq)
	}
	if seqs[0] != seqs[1] {
		t.Fatalf("the retry landed at %d, the first at %d: not a duplicate", seqs[1], seqs[0])
	}
	r := followOwn(t, s, 1)
	sameAsTheStream(t, r.upTo(t, seqs[0]), theStream(t, s, 1))
}

// Another writer's sends (a standby controller folding the active one's
// pushes) are read by direct gets, not by a consumer made and removed
// for each gap: the stream sees the own read's one consumer and no other,
// however many gaps its reports leave. Each gap read by a consumer of its
// own made one more, and its removal could wait seconds.
func TestAnOwnReadFillsGapsWithoutMakingConsumers(t *testing.T) {
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	s := rememberingStore(t, nc)
	ctx := context.Background()
	created := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED."+events.Stream+".>", created)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := followOwn(t, s, 1)
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 20 {
		node := "web-" + strconv.Itoa(i)
		// Two sends of another writer, then a report the consumer
		// delivers: a gap of two below each delivery.
		for range 2 {
			if _, err := js.Publish(ctx, events.DeclarationSubject(node), []byte(`{"another writer's send":"`+node+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		ack, err := js.Publish(ctx, events.ReportSubject(node, "DeclarationApplied"), []byte(`{"a report":"`+node+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	sameAsTheStream(t, r.upTo(t, last), theStream(t, s, 1))
	// The plain read just made (theStream) is one more consumer.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(created); n > 2 {
		t.Errorf("%d consumers made on the stream to read 20 gaps, want the own read's and theStream's alone", n)
	}
}

// A message's writer chooses the headers it is stored with, and the
// server appends its own after them: a report stored with a Nats-Subject
// of a send and a time of its writer's choosing is still, by a direct get
// and in a gap the own read fills, the report it is, stored when the
// server stored it. Read by the first value, a node's report reached the
// fold as a send.
func TestADirectGetTakesTheServersHeadersNotTheWriters(t *testing.T) {
	srv, s, versions := oneEnrolled(t)
	ctx := context.Background()
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	report := events.ReportSubject("web-1", "DeclarationApplied")
	forged := nats.NewMsg(report)
	forged.Data = []byte(`{"a report":"with headers of its writer's choosing"}`)
	forged.Header.Set(jetstream.SubjectHeader, events.DeclarationSubject("web-1"))
	forged.Header.Set(jetstream.TimeStampHeaer, ownStamp.Add(-time.Hour).Format(time.RFC3339Nano))
	forged.Header.Set(jetstream.SequenceHeader, "1")
	// Another writer's send, then the forged report, then this store's
	// send: the own read fills the first two from the stream.
	if _, err := js.Publish(ctx, events.DeclarationSubject("web-9"), []byte(`{"another writer":"send"}`)); err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	m, found, err := s.Last(ctx, report)
	if err != nil || !found {
		t.Fatal(found, err)
	}
	if m.Subject != report || m.Seq != ack.Sequence || m.Time.Year() < 2020 {
		t.Errorf("a direct get answered %s at %d stored %s; the server stored %s at %d now", m.Subject, m.Seq, m.Time, report, ack.Sequence)
	}
	r := followOwn(t, s, 1)
	pushTo(t, s, versions, 1)
	got := r.upTo(t, versions["web-1"])
	sameAsTheStream(t, got, theStream(t, s, 1))
	for _, m := range got {
		if m.Seq == ack.Sequence && (m.Subject != report || m.Time.Year() < 2020) {
			t.Errorf("the own read handed the report at %d on as %s stored %s", m.Seq, m.Subject, m.Time)
		}
	}
}

// A hole in a gap (a stream from before deletes were denied): the direct
// gets do not answer its sequences, and the read of the range passes over
// them, once, in order. Without that read the own read waits for ever.
func TestAnOwnReadPassesOverAHoleInAGap(t *testing.T) {
	srv := embeddedtest.Server(t)
	nc := embeddedtest.Conn(t, srv)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.Stream, Subjects: []string{events.SubjectsEvents, events.SubjectsReports},
		Storage: jetstream.FileStorage, AllowDirect: true, AllowAtomicPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, subj := range []string{events.DeclarationSubject("web-1"), events.DeclarationSubject("web-2"), events.DeclarationSubject("web-3"),
		events.DeclarationSubject("web-4"), events.ReportSubject("web-1", "DeclarationApplied")} {
		ack, err := js.Publish(ctx, subj, []byte(`{"x":"`+subj+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	for _, seq := range seqs[1:3] {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	s := rememberingStore(t, nc)
	r := followOwn(t, s, 1)
	sameAsTheStream(t, r.upTo(t, seqs[4]), theStream(t, s, 1))
}
