package events

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 123, time.FixedZone("x", 3600))
	ev := NodeEnrolled{Name: "web-1", Capabilities: []string{"linux"}, Labels: map[string]string{"quote\"": "new\nline"}}
	b, err := Encode(NodeAggregate("web-1"), "cmd_1.a:b", "", 2, at, ev)
	if err != nil {
		t.Fatal(err)
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := Envelope{Meta: Meta{ID: "cmd_1.a:b/2", Type: "NodeEnrolled", Version: 1, Aggregate: NodeAggregate("web-1"),
		OccurredAt: at.UTC(), CommandID: "cmd_1.a:b"}}
	data := env.Data
	env.Data = nil
	if diff := cmp.Diff(want, env); diff != "" {
		t.Fatalf("envelope (-want +got):\n%s", diff)
	}
	_, got, err := Decode(b)
	if err != nil || !cmp.Equal(got, Event(ev)) {
		t.Fatalf("decode: %v %v (data %s)", got, err, data)
	}
	if err := ValidateCommandID("bad\r\nid"); err == nil || !strings.Contains(err.Error(), "command id") {
		t.Fatalf("a command id that breaks a header was accepted: %v", err)
	}
}

func TestDecodeRefusesUnknownTypesAndVersions(t *testing.T) {
	for _, raw := range []string{
		`{"id":"x","type":"NodeTeleported","version":1,"data":{}}`,
		`{"id":"x","type":"NodeEnrolled","version":9,"data":{}}`,
		`not json`,
		`{"id":"x","version":1}`,
	} {
		if _, _, err := Decode([]byte(raw)); err == nil {
			t.Errorf("%s decoded without error", raw)
		}
	}
	_, _, err := Decode([]byte(`{"id":"x","type":"NodeEnrolled","version":9,"data":{}}`))
	if !strings.Contains(err.Error(), `"NodeEnrolled" version 9`) {
		t.Errorf("error does not name type and version: %v", err)
	}
}

func TestDecodeFromSubjectAgreesWithDecode(t *testing.T) {
	ev := NodeRetired{Name: "web-1", RetiredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, _ := Encode(NodeAggregate("web-1"), "c1", "", 0, time.Now(), ev)
	env1, ev1, err1 := Decode(b)
	env2, ev2, err2 := DecodeFromSubject(NodeAggregate("web-1").Subject("NodeRetired"), b)
	env1.Data, env1.ID, env1.CommandID = nil, "", ""
	if err1 != nil || err2 != nil || !cmp.Equal(env1, env2) || !cmp.Equal(ev1, ev2) {
		t.Fatalf("decode %v %v %v; from subject %v %v %v", env1, ev1, err1, env2, ev2, err2)
	}
	// A subject that lies about the type takes the general path: the envelope decides.
	_, ev3, err := DecodeFromSubject("mesh.ev.node.web-1.NodeEnrolled", b)
	if err != nil || !cmp.Equal(ev3, Event(ev)) {
		t.Fatalf("mismatched subject: %v %v", ev3, err)
	}
	if _, _, err := DecodeFromSubject("mesh.ev.node.web-1.NodeEnrolled", []byte(`{"type":"NodeEnrolled","version":5,"data":{}}`)); err == nil {
		t.Fatal("an unknown version decoded on the fast path")
	}
}

// The fold's fast path reads exactly what the general decoder reads, for
// what Encode writes, and steps aside for anything else.
func TestFastPathAgreesWithTheGeneralDecoder(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 123456789, time.UTC)
	evs := []Event{
		NodeEnrolled{Name: "web-1", Capabilities: []string{"linux"}, Labels: map[string]string{"k": "a \"quoted\" }, value"}},
		NodeRetired{Name: "web-1", RetiredAt: at},
		ModuleAssigned{Node: "n", Module: "m", Build: "b", Settings: map[string]string{"x": "}"}},
	}
	for _, ev := range evs {
		raw, err := Encode(NodeAggregate("web-1"), "cmd.1", "", 3, at, ev)
		if err != nil {
			t.Fatal(err)
		}
		typ, version, gotAt, _, data, ok := splitEnvelope(raw, ev.EventType())
		if !ok || typ != ev.EventType() || version != 1 || !gotAt.Equal(at) {
			t.Fatalf("%s: split %v %q %d %v", ev.EventType(), ok, typ, version, gotAt)
		}
		env, want, _ := Decode(raw)
		if string(data) != string(env.Data) {
			t.Fatalf("%s: data %s, want %s", ev.EventType(), data, env.Data)
		}
		_, got, err := DecodeFromSubject(NodeAggregate("web-1").Subject(ev.EventType()), raw)
		if err != nil || !cmp.Equal(got, want) {
			t.Fatalf("%s: fast %v %v, general %v", ev.EventType(), got, err, want)
		}
	}
	for _, other := range []string{
		`{"type":"NodeRetired","id":"x","version":1,"aggregate":{"kind":"node","id":"n"},"occurred_at":"2026-12-02T14:00:00Z","command_id":"c","data":{"name":"n"}}`,
		`{"id":"x\"y","type":"NodeRetired","version":1,"aggregate":{"kind":"node","id":"n"},"occurred_at":"2026-12-02T14:00:00Z","command_id":"c","data":{}}`,
		`{"id":"x","type":"NodeRetired","version":1,"aggregate":{"kind":"node","id":"n"},"occurred_at":"2026-12-02T14:00:00Z","command_id":"c","data":{"name":"n"},"extra":1}`,
	} {
		_, _, _, _, data, ok := splitEnvelope([]byte(other), "NodeRetired")
		if ok && json.Valid(data) {
			t.Errorf("the fast path claimed %s (data %s)", other, data)
		}
	}
}

// Issue 33: who asked is in the envelope, and the fold's fast path reads
// it as the general decoder does; a report's envelope names no one.
func TestTheEnvelopeSaysWhoAsked(t *testing.T) {
	t.Parallel()
	ctx := WithBy(context.Background(), "alice")
	ev := NodeRetired{Name: "web-1", RetiredAt: time.Unix(1, 0).UTC()}
	raw, err := Encode(NodeAggregate("web-1"), "c1", ByOf(ctx), 0, time.Now(), ev)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Decode(raw)
	if err != nil || env.By != "alice" {
		t.Fatalf("general: by %q, %v", env.By, err)
	}
	fast, _, err := DecodeFromSubject(NodeAggregate("web-1").Subject(ev.EventType()), raw)
	if err != nil || fast.By != "alice" {
		t.Fatalf("fast path: by %q, %v", fast.By, err)
	}
	raw, _ = Encode(NodeAggregate("web-1"), "c1", ByOf(context.Background()), 0, time.Now(), ev)
	if strings.Contains(string(raw), `"by"`) {
		t.Fatalf("an envelope nobody is named in carries by: %s", raw)
	}
	for _, name := range []string{ActorController, ActorReconciler, "rollout"} {
		if !Reserved(name) {
			t.Errorf("%s is an actor's name, not one an operator may take", name)
		}
	}
}

// Issue 32 after issue 33: an artifact's events name the operator who
// asked; one written before operators had names (the envelope naming no
// one, the event "operator") still decodes as it was, by both decoders.
func TestAnArtifactEventFromBeforeOperatorsHadNamesStillDecodes(t *testing.T) {
	t.Parallel()
	old := ArtifactStored{Name: "tool", Digest: strings.Repeat("a", 64), Size: 10, By: "operator"}
	raw, err := Encode(ArtifactAggregate("tool"), "c1", "", 0, time.Now(), old)
	if err != nil {
		t.Fatal(err)
	}
	env, ev, err := Decode(raw)
	if err != nil || env.By != "" || ev != old {
		t.Fatalf("general: %+v by %q, %v", ev, env.By, err)
	}
	env, ev, err = DecodeFromSubject(ArtifactAggregate("tool").Subject(old.EventType()), raw)
	if err != nil || env.By != "" || ev != old {
		t.Fatalf("fast path: %+v by %q, %v", ev, env.By, err)
	}
}
