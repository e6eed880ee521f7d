package compose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLineDiff(t *testing.T) {
	got := LineDiff("a\nb\nc\n", "a\nc\nd\n")
	want := []string{"  a", "- b", "  c", "+ d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if LineDiff("same\n", "same\n") != nil {
		t.Fatal("equal texts have a diff")
	}
}

func TestDiff(t *testing.T) {
	s := func(v string) *string { return &v }
	old := &Declaration{Resources: []Resource{
		{Path: "/a", Kind: "file", Mode: "0644", Content: s("x = 1\n"), Module: "m"},
		{Path: "/gone", Kind: "directory", Mode: "0755", Module: "m"},
		{Path: "/same", Kind: "directory", Mode: "0755", Module: "m"},
	}}
	new := &Declaration{Resources: []Resource{
		{Path: "/a", Kind: "file", Mode: "0600", Content: s("x = 2\n"), Module: "m"},
		{Path: "/new", Kind: "directory", Mode: "0755", Module: "n"},
		{Path: "/same", Kind: "directory", Mode: "0755", Module: "m"},
	}}
	var got []string
	for _, c := range Diff(old, new) {
		got = append(got, c.Path+" "+c.Change+" "+strings.Join(c.What, ",")+" "+strings.Join(c.Lines, "|"))
	}
	want := []string{"/a changed mode 0644 -> 0600,content - x = 1|+ x = 2", "/gone removed  ", "/new added  "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if n := len(Diff(nil, new)); n != 3 {
		t.Fatalf("never sent: %d changes, want every resource added", n)
	}
}
