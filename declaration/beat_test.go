package declaration

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// A beat holds only on its own subject, under its node's key, as said.
func TestABeatIsItsNodesOnItsSubject(t *testing.T) {
	key, other := []byte("key of web-1"), []byte("key of web-2")
	at := time.Unix(0, 1_765_000_000_123_456_789)
	b := Beat(key, "mesh.live.web-1", at)
	var c MACChecker
	if got, ok := c.CheckBeat(key, "mesh.live.web-1", b); !ok || !got.Equal(at) {
		t.Fatalf("its own beat: %v %v", got, ok)
	}
	tampered := append([]byte("2"), b[1:]...)
	for name, tc := range map[string]struct {
		key     []byte
		subject string
		data    []byte
	}{
		"another node's key": {other, "mesh.live.web-1", b},
		"moved to a subject": {key, "mesh.live.web-2", b},
		"its time changed":   {key, "mesh.live.web-1", tampered},
		"no MAC":             {key, "mesh.live.web-1", []byte("1765000000123456789")},
		"a JetStream answer": {key, "mesh.live.web-1", []byte(`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response"}`)},
		"nothing":            {key, "mesh.live.web-1", nil},
		"a MAC far too long": {key, "mesh.live.web-1", append([]byte("1765000000123456789 "), bytes.Repeat([]byte("A"), 200)...)},
		"no key":             {nil, "mesh.live.web-1", Beat(nil, "mesh.live.web-1", at)},
	} {
		if _, ok := c.CheckBeat(tc.key, tc.subject, tc.data); ok {
			t.Errorf("%s: held", name)
		}
	}
	// A check reads the beat and changes nothing of it, and (its keyed
	// hash kept) copies nothing: liveness checks 20,000 a second at
	// 100,000 nodes, and each copy was the collector's to sweep.
	was := bytes.Clone(b)
	if allocs := testing.AllocsPerRun(100, func() { c.CheckBeat(key, "mesh.live.web-1", b) }); allocs != 0 {
		t.Errorf("a beat's check allocated %.0f time(s); want none", allocs)
	}
	if !bytes.Equal(b, was) {
		t.Errorf("the check changed the beat: %q, was %q", b, was)
	}
}

// A node's beat key is derived from the controller's key and its name
// alone, the same however often asked, and remembered: liveness asks at
// every beat.
func TestANodesBeatKeyIsDerivedOnceAndRemembered(t *testing.T) {
	kp, _ := nkeys.CreateAccount()
	k, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewKeyring(kp)
	if err != nil {
		t.Fatal(err)
	}
	k.NodeMAC("web-2") // web-2 remembered, its beat key not yet asked for
	web1 := k.NodeBeat("web-1")
	if !bytes.Equal(web1, again.NodeBeat("web-1")) || !bytes.Equal(web1, deriveRaw(k.seed, "beat\x00web-1")) {
		t.Fatal("two keyrings of one controller key answer web-1 different beat keys")
	}
	if bytes.Equal(web1, k.NodeBeat("web-2")) || bytes.Equal(web1, k.NodeMAC("web-1")) {
		t.Fatal("web-1's beat key is another node's, or its report MAC key")
	}
	if allocs := testing.AllocsPerRun(100, func() { k.NodeBeat("web-1") }); allocs != 0 {
		t.Errorf("asking for a beat key asked before allocated %.0f time(s); want none (derived again)", allocs)
	}
	if !bytes.Equal(k.NodeBeat("web-1"), web1) {
		t.Error("the remembered beat key is not the one derived")
	}
	if !bytes.Equal(k.NodeBeat("web-2"), again.NodeBeat("web-2")) {
		t.Error("web-2's beat key, asked for after web-1's, is not its own")
	}
}
