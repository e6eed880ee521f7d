package rows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

func TestAssignmentCodecRoundTrips(t *testing.T) {
	for _, a := range []AssignmentRow{
		{Node: "n", Module: "m", Build: "b", Settings: map[string]string{}, AssignedAt: time.Unix(0, 0).UTC()},
		fullAssignment(time.Date(2026, 12, 2, 16, 0, 0, 123456789, time.UTC)),
	} {
		b := EncodeAssignment(a)
		got, err := DecodeAssignment(a.Node, a.Module, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		// Every truncation is refused, never half-read.
		for i := range b {
			if _, err := DecodeAssignment(a.Node, a.Module, b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d bytes: err = %v", i, err)
			}
		}
	}
}

func TestLivenessCodecRoundTrips(t *testing.T) {
	at := time.Date(2026, 12, 6, 21, 0, 0, 7, time.UTC)
	for _, l := range []Liveness{
		{Node: "n"},
		{Node: "n", LastHeard: at, Since: at.Add(time.Second), Version: 3},
		fullLiveness(at),
	} {
		b := EncodeLiveness(l)
		got, err := DecodeLiveness(l.Node, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(l, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		for i := range b {
			if _, err := DecodeLiveness(l.Node, b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d bytes: err = %v", i, err)
			}
		}
		// A byte more is no row of this codec either.
		if _, err := DecodeLiveness(l.Node, append(b, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a byte appended: err = %v", err)
		}
	}
}

func TestNodeCodecRoundTrips(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 7, time.UTC)
	// Digests as the mesh makes them (kept as bytes), and in every other
	// form a row may hold (kept as written).
	hexed := fullNode(at)
	hexed.LastSent.Digest, hexed.LastSent.ContentDigest, hexed.LastReport.Digest = hexDigest, hexDigest[1:]+"0", hexDigest
	odd := fullNode(at)
	odd.LastSent.Digest, odd.LastSent.ContentDigest, odd.LastReport.Digest = strings.ToUpper(hexDigest), "", hexDigest+"0"
	for _, n := range []Node{
		{Name: "a", Capabilities: []string{}, Labels: map[string]string{}},
		fullNode(at), hexed, odd,
	} {
		b := EncodeNode(n)
		got, err := DecodeNode(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(n, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		for i := range b {
			if _, err := DecodeNode(b[:i]); err == nil {
				t.Fatalf("truncated to %d of %d bytes and still decoded", i, len(b))
			}
			if _, err := DecodeNodeAs(b[:i], true); err == nil {
				t.Fatalf("truncated to %d of %d bytes and still decoded briefly", i, len(b))
			}
		}
		// Brief is the whole row but for capabilities and labels.
		brief, err := DecodeNodeAs(b, true)
		if err != nil {
			t.Fatal(err)
		}
		whole := n
		whole.Capabilities, whole.Labels = nil, nil
		if diff := cmp.Diff(whole, brief); diff != "" {
			t.Fatalf("brief (-want +got):\n%s", diff)
		}
	}
}

func TestHistoryCodecRoundTrips(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 7, time.UTC)
	for _, e := range []HistoryEntry{
		{Seq: 1, Kind: HistoryDeclaration, At: at, Sequence: 1, Digest: "d", ContentDigest: "c", By: "push", Operator: "alice", Resources: 0, Builds: []compose.ModuleBuild{}},
		{Seq: 2, Kind: HistoryDeclaration, At: at, Sequence: 2, Digest: "d", ContentDigest: "c", By: "declare", Resources: 3},
		{Seq: 3, Kind: HistoryDeclaration, At: at, Sequence: 1 << 40, Digest: "d", By: "push", Resources: 2,
			Builds: []compose.ModuleBuild{{Module: "app", Build: "b1"}, {Module: "db", Build: ""}}},
		{Seq: 4, Kind: HistoryApplied, At: at, Sequence: 2, Digest: "d", Changed: 5},
		{Seq: 5, Kind: HistoryFailed, At: at, Sequence: 2, Digest: "d", Failed: []events.ResourceFailure{{Path: "/a", Reason: "why"}, {Path: "/b"}}},
		{Seq: 6, Kind: HistoryFailed, At: at, Sequence: 2, Digest: "d"},
		{Seq: 7, Kind: HistoryRefused, At: at, Sequence: 2, Digest: "d", Reason: "replay", Highest: 9},
		{Seq: 8, Kind: HistoryDrift, At: at, Sequence: 2, Paths: []string{"/etc/a", "/etc/b"}, Corrected: true},
		{Seq: 9, Kind: HistoryDrift, At: at, Sequence: 3, Paths: []string{}},
		{Seq: 10, Kind: HistoryInterrupted, At: at, Sequence: 4, Digest: "d", BeganAt: at.Add(-time.Minute)},
		{Seq: 11, Kind: HistoryUnreachable, At: at, LastHeard: at.Add(-21 * time.Second), Bound: 20 * time.Second},
		{Seq: 12, Kind: HistoryReachable, At: at},
		// Digests as the mesh makes them (kept as their bytes), and ones
		// that only look like them (kept as written).
		{Seq: 13, Kind: HistoryDeclaration, At: at, Sequence: 5, Digest: hexDigest, ContentDigest: hexDigest[1:] + "0", By: "push", Resources: 1,
			Builds: []compose.ModuleBuild{{Module: "app", Build: hexDigest}}},
		{Seq: 14, Kind: HistoryApplied, At: at, Sequence: 5, Digest: strings.ToUpper(hexDigest), Changed: 1},
		{Seq: 15, Kind: HistoryApplied, At: at, Sequence: 5, Digest: hexDigest[:63] + "g"},
		{Seq: 16, Kind: HistoryDeclaration, At: at, Sequence: 5, Digest: hexDigest + "0", ContentDigest: "", By: "push"},
	} {
		b := EncodeHistory(e)
		got, err := DecodeHistory(e.Seq, b)
		if err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		for i := range b {
			if _, err := DecodeHistory(e.Seq, b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%+v truncated to %d of %d bytes: err = %v", e, i, len(b), err)
			}
		}
	}
}

const hexDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// A digest the mesh made is kept as its 32 bytes: a history row of a send
// and its report is most of a snapshot of the read models (issue 34).
func TestHistoryRowsKeepDigestsAsBytes(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 7, time.UTC)
	sent := HistoryEntry{Kind: HistoryDeclaration, At: at, Sequence: 5, Digest: hexDigest, ContentDigest: hexDigest, By: "push", Resources: 1,
		Builds: []compose.ModuleBuild{{Module: "app", Build: hexDigest}}}
	// Three digests of 64 characters in hex, each in 33 bytes.
	if n := len(EncodeHistory(sent)); n > 3*33+30 {
		t.Fatalf("a send's history row is %d bytes: its digests are not kept as bytes", n)
	}
	if n := len(EncodeHistory(HistoryEntry{Kind: HistoryApplied, At: at, Sequence: 5, Digest: hexDigest, Changed: 1})); n > 33+20 {
		t.Fatalf("a report's history row is %d bytes: its digest is not kept as bytes", n)
	}
}

// A node row keeps its three digests as 32 bytes each, as history rows do:
// a push writes every node's row twice, and the hex was most of it.
func TestNodeRowsKeepDigestsAsBytes(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 7, time.UTC)
	n := fullNode(at)
	n.LastSent.Digest, n.LastSent.ContentDigest, n.LastReport.Digest = hexDigest, hexDigest, hexDigest
	hexLong := n
	hexLong.LastSent = &wire.Sent{}
	*hexLong.LastSent = *n.LastSent
	hexLong.LastSent.ContentDigest = strings.ToUpper(hexDigest) // not lowercase hex: kept as written
	// The same row but for one digest kept as its 64 characters (a tag,
	// a length, 64 bytes) against its 32 bytes (a tag, 32 bytes): 33 more.
	if got, long := len(EncodeNode(n)), len(EncodeNode(hexLong)); long-got != 33 {
		t.Fatalf("a row with its digests as bytes is %d bytes, with one in hex %d: its digests are not kept as bytes", got, long)
	}
}

// everyFieldSet fails unless every field of v (and of the structs it
// points to) holds a value: a round-trip test over a sample that leaves a
// field empty cannot tell a codec that drops it from one that keeps it.
func everyFieldSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		if f.IsZero() {
			t.Fatalf("the sample leaves %s empty: give it a value, and the codec a place for it", name)
		}
		if f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct && f.Elem().Type() != reflect.TypeFor[time.Time]() {
			everyFieldSet(t, f, name)
		}
	}
}

// A field added to a row without a place in its codec would vanish from
// the read models on the next fold: the full samples above must fill every
// field, so that their round trip covers it.
func TestCodecSamplesFillEveryField(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 7, time.UTC)
	everyFieldSet(t, reflect.ValueOf(fullNode(at)), "Node")
	everyFieldSet(t, reflect.ValueOf(fullAssignment(at)), "AssignmentRow")
	everyFieldSet(t, reflect.ValueOf(fullLiveness(at)), "Liveness")
}

// fullNode, fullLiveness and fullAssignment are rows with every field set.
func fullNode(at time.Time) Node {
	return Node{Name: "web-1", Capabilities: []string{"amd64", "linux"}, Labels: map[string]string{"zone": "eu-1", "": "x"}, Retired: true,
		EnrolledAt: at, RetiredAt: at.Add(time.Hour), EnrolledSeq: 3, Version: 1 << 33,
		LastSent: &wire.Sent{Sequence: 7, Digest: "d", ContentDigest: "c", By: "push", Operator: "ci", Resources: 5, At: at, StreamSeq: 99},
		LastReport: &wire.Report{Outcome: "failed", Sequence: 7, Digest: "d", Reason: "r", Highest: 6, At: at, StreamSeq: 100, FailingSince: at,
			Failed: []events.ResourceFailure{{Path: "/a", Reason: "why"}, {Path: "/b", Reason: ""}}}}
}

func fullLiveness(at time.Time) Liveness {
	return Liveness{Node: "web-1", Unreachable: true, LastHeard: at, Bound: 20 * time.Second, Since: at.Add(21 * time.Second), Version: 1 << 35}
}

func fullAssignment(at time.Time) AssignmentRow {
	return AssignmentRow{Node: "web-1", Module: "app", Build: "d685561", Policy: events.PolicyPinned,
		Settings: map[string]string{"workers": "8", "": "", "k": "v\x00w"}, AssignedAt: at, Seq: 1 << 40}
}

// lowerHex writes what encoding/hex writes, for every value of every
// byte of a digest: a pair put in the wrong order, or a wrong digit in the
// table, reads back as another digest, and status then calls a node that
// applied its declaration behind.
func TestLowerHexIsEncodingHex(t *testing.T) {
	var sum [sha256.Size]byte
	for v := range 256 {
		for i := range sum {
			sum[i] = byte(v + i*7)
		}
		var got [2 * sha256.Size]byte
		lowerHex(&got, &sum)
		if want := hex.EncodeToString(sum[:]); string(got[:]) != want {
			t.Fatalf("lowerHex(%x) = %s", sum, got)
		}
	}
}
