package aggregates

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/events"
)

var now = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

func given(name string, evs ...events.Event) *Node {
	n := NewNode(name)
	for i, ev := range evs {
		n.Apply(events.Recorded{Seq: uint64(i + 1), Event: ev, Envelope: events.Envelope{Meta: events.Meta{OccurredAt: now.Add(-time.Hour)}}})
	}
	return n
}

func TestNodeDecide(t *testing.T) {
	enrolled := events.NodeEnrolled{Name: "web-1", Capabilities: []string{"linux"}, Labels: map[string]string{}}
	retired := events.NodeRetired{Name: "web-1", RetiredAt: now}
	cases := []struct {
		name    string
		given   []events.Event
		cmd     any
		want    []events.Event
		wantErr error
		say     string // part of the refusal's sentence
	}{
		{name: "enroll sorts and dedupes capabilities", cmd: EnrollNode{Name: "web-1", Capabilities: []string{"linux", "amd64", "linux"}, Labels: map[string]string{"zone": "a"}},
			want: []events.Event{events.NodeEnrolled{Name: "web-1", Capabilities: []string{"amd64", "linux"}, Labels: map[string]string{"zone": "a"}}}},
		{name: "enroll a taken name", given: []events.Event{enrolled}, cmd: EnrollNode{Name: "web-1"}, wantErr: ErrNameTaken, say: "choose another name"},
		{name: "a retired name stays taken", given: []events.Event{enrolled, retired}, cmd: EnrollNode{Name: "web-1"}, wantErr: ErrNameTaken, say: "retired"},
		{name: "enroll an invalid name", cmd: EnrollNode{Name: "Web.1"}, wantErr: ErrInvalid, say: "lowercase letters"},
		{name: "enroll an invalid capability", cmd: EnrollNode{Name: "web-1", Capabilities: []string{"a b"}}, wantErr: ErrInvalid, say: "capability"},
		{name: "enroll an invalid label", cmd: EnrollNode{Name: "web-1", Labels: map[string]string{"": "x"}}, wantErr: ErrInvalid, say: "label key"},
		{name: "retire", given: []events.Event{enrolled}, cmd: RetireNode{Name: "web-1"}, want: []events.Event{retired}},
		{name: "retire again is satisfied", given: []events.Event{enrolled, retired}, cmd: RetireNode{Name: "web-1"}},
		{name: "retire an unknown node", cmd: RetireNode{Name: "web-1"}, wantErr: ErrUnknownNode, say: "mesh node list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := given("web-1", c.given...).Decide(c.cmd, now)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), c.say) {
				t.Fatalf("refusal %q does not say %q", err, c.say)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNameRule(t *testing.T) {
	for _, ok := range []string{"a", "web-1", "0db", strings.Repeat("a", 63)} {
		if err := events.ValidateName("node", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a.b", "a*", "a>", "a b", "Web", strings.Repeat("a", 64), "é"} {
		err := events.ValidateName("node", bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "lowercase letters") && !strings.Contains(err.Error(), "at most 63") {
			t.Errorf("%q: refusal %q does not say what is allowed", bad, err)
		}
	}
}
