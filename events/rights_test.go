package events

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Every type the decoder table reads has a right, and nothing else does: a
// new event type without one would be foreign wherever it arrived.
func TestEveryEventTypeHasItsRight(t *testing.T) {
	for typ := range table {
		if _, ok := Rights[typ]; !ok {
			t.Errorf("%s is in the decoder table but has no right", typ)
		}
	}
	for typ := range Rights {
		if _, ok := table[typ]; !ok {
			t.Errorf("%s has a right but is not in the decoder table", typ)
		}
	}
}

// Check holds an event to its subject: its writer's prefix, its aggregate's
// kind, its type in the last token, and the name inside.
func TestCheckHoldsAnEventToItsSubject(t *testing.T) {
	enc := func(agg AggregateID, ev Event) []byte {
		b, err := Encode(agg, "c", "", 0, time.Unix(0, 0), ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	applied := DeclarationApplied{Node: "web-1", Sequence: 1, Digest: "d"}
	cases := []struct {
		subject string
		data    []byte
		want    string // "" rightful; else a part of the foreign reason, or "newer"
	}{
		{"mesh.ev.node.web-1.NodeEnrolled", enc(NodeAggregate("web-1"), NodeEnrolled{Name: "web-1"}), ""},
		{"mesh.rp.web-1.DeclarationApplied", enc(NodeAggregate("web-1"), applied), ""},
		{"mesh.ev.node.web-2.NodeEnrolled", enc(NodeAggregate("web-1"), NodeEnrolled{Name: "web-1"}), `naming "web-1"`},
		{"mesh.rp.web-2.DeclarationApplied", enc(NodeAggregate("web-1"), applied), `naming "web-1"`},
		{"mesh.rp.web-1.NodeEnrolled", enc(NodeAggregate("web-1"), NodeEnrolled{Name: "web-1"}), "only the controller writes it"},
		{"mesh.ev.node.web-1.DeclarationApplied", enc(NodeAggregate("web-1"), applied), "it is a node's report"},
		{"mesh.ev.module.web-1.NodeEnrolled", enc(NodeAggregate("web-1"), NodeEnrolled{Name: "web-1"}), "on a module aggregate"},
		{"mesh.rp.web-1.DeclarationFailed", enc(NodeAggregate("web-1"), applied), "which is for DeclarationFailed"},
		{"mesh.rp.web-1.x.DeclarationApplied", enc(NodeAggregate("web-1"), applied), "not one the mesh writes"},
		{"mesh.rp.web-1.DeclarationApplied", []byte("garbage"), "not a mesh event"},
		{"mesh.rp.web-1.Teleported", []byte(`{"id":"x","type":"Teleported","version":1,"data":{}}`), "not a mesh event"},
		{"mesh.ev.node.web-1.Teleported", []byte(`{"id":"x","type":"Teleported","version":1,"data":{}}`), "newer"},
		{"mesh.ev.node.web-1.NodeEnrolled", []byte(`{"id":"x","type":"NodeEnrolled","version":9,"data":{}}`), "newer"},
		{"mesh.ev.node.web-1.Other", []byte(`{"id":"x","type":"Teleported","version":1,"data":{}}`), "not a mesh event"},
	}
	for _, c := range cases {
		_, _, err := Read(c.subject, c.data)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.subject, err)
		case c.want == "newer" && !errors.Is(err, ErrNewer):
			t.Errorf("%s: %v, want a newer controller's event", c.subject, err)
		case c.want != "" && c.want != "newer" && (!errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want foreign saying %q", c.subject, err, c.want)
		}
	}
}

// Every agent report is one the fold and audit hold to the node's report
// key: a type added to AgentReport and not to their type switches would be
// folded unchecked. This lists them where the compiler cannot.
func TestAgentReportsAreNodeReports(t *testing.T) {
	for typ := range table {
		if AgentReport(typ) && Rights[typ].Writer != ByNode {
			t.Errorf("%s is an agent report but not written by a node", typ)
		}
	}
}
