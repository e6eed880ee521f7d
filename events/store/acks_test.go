package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// decodeAck reads what the stream answers a publish as encoding/json
// reads it: the plain answer by hand, the rest (a duplicate, a conflict)
// through the library's types. Each answer here is a real server's.
func TestDecodeAckReadsTheServersAnswersAsJSONDoes(t *testing.T) {
	ctx := context.Background()
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKS", Subjects: []string{"acks.>"}}); err != nil {
		t.Fatal(err)
	}
	ask := func(id, expect string) *nats.Msg {
		t.Helper()
		m := nats.NewMsg("acks.one")
		m.Data = []byte("x")
		m.Header.Set(jetstream.MsgIDHeader, id)
		if expect != "" {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, expect)
		}
		reply, err := nc.RequestMsg(m, CallTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	plain := ask("a", "")
	if !strings.HasPrefix(string(plain.Data), `{"stream":"ACKS","seq":`) {
		t.Fatalf("the server's plain answer is %s: decodeAck's fast path no longer matches it", plain.Data)
	}
	for _, tc := range []struct {
		name     string
		reply    *nats.Msg
		conflict bool
	}{
		{"plain", plain, false},
		{"a second", ask("b", ""), false},
		{"duplicate", ask("a", ""), false},
		{"conflict", ask("c", "1"), true},
	} {
		got, err := decodeAck(tc.reply)
		var want struct {
			jetstream.PubAck
			Error *jetstream.APIError `json:"error"`
		}
		if jerr := json.Unmarshal(tc.reply.Data, &want); jerr != nil {
			t.Fatal(jerr)
		}
		if tc.conflict {
			if !isConflict(err) || want.Error == nil {
				t.Errorf("%s: %s decoded as %v, want the conflict it says", tc.name, tc.reply.Data, err)
			}
			continue
		}
		if err != nil || want.Error != nil {
			t.Fatalf("%s: %s decoded as %v", tc.name, tc.reply.Data, err)
		}
		if diff := cmp.Diff(want.PubAck, got); diff != "" {
			t.Errorf("%s: %s decoded unlike encoding/json (-json +decodeAck):\n%s", tc.name, tc.reply.Data, diff)
		}
	}
	for _, odd := range []string{`{"stream":"A","seq":}`, `{"stream":"A","seq":12,"x":1}`, `{"stream":"A\"","seq":1}`, `not json`,
		`{"stream":"MESH","domain":"hub","seq":5}`, `{"stream":"","seq":5}`, `{"stream":"A\\","seq":1}`, `{"stream":"A","seq":05}`,
		`{"stream":"A","seq":0}`, "{\"stream\":\"A\x01\",\"seq\":1}", "{\"stream\":\"A\xff\",\"seq\":1}"} {
		got, err := decodeAck(&nats.Msg{Data: []byte(odd)})
		var want jetstream.PubAck
		jerr := json.Unmarshal([]byte(odd), &want)
		if (err == nil) != (jerr == nil && want.Stream != "") || (err == nil && got != want) {
			t.Errorf("%s: decodeAck %+v, %v; encoding/json %+v, %v", odd, got, err, want, jerr)
		}
	}
	if _, err := decodeAck(&nats.Msg{Header: nats.Header{"Status": {"503"}}}); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a 503 with no body decoded as %v, want no stream's answer", err)
	}
}

// A window given up on answers what did not come with the cause, once,
// and an acknowledgement that comes after finds nothing to change.
func TestAnAbandonedWindowIgnoresALateAcknowledgement(t *testing.T) {
	nc := embeddedtest.Conn(t, embeddedtest.Server(t))
	s := &Store{nc: nc, name: "MESH"}
	msgs := []*nats.Msg{nats.NewMsg("mesh.ev.node.a.X"), nil, nats.NewMsg("mesh.ev.node.b.X")}
	w, err := s.ackWindow(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Reply == "" || msgs[2].Reply == "" || msgs[0].Reply == msgs[2].Reply {
		t.Fatalf("reply subjects %q and %q: each publish needs its own", msgs[0].Reply, msgs[2].Reply)
	}
	s.onAck(&nats.Msg{Subject: msgs[0].Reply, Data: []byte(`{"stream":"MESH","seq":41}`)})
	s.abandon(w, errAckTimeout)
	select {
	case <-w.done:
	default:
		t.Fatal("an abandoned window is still waited on")
	}
	s.onAck(&nats.Msg{Subject: msgs[2].Reply, Data: []byte(`{"stream":"MESH","seq":42}`)})
	want := []ackGot{{in: true, seq: 41}, {in: true}, {in: true, err: errAckTimeout}}
	if diff := cmp.Diff(want, w.got, cmp.AllowUnexported(ackGot{}), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := len(s.acks.windows); n != 0 {
		t.Errorf("%d windows still registered", n)
	}
}
