package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// A send's content digest is the digest of the content of exactly the
// declaration it carries (rule 4), though push takes it from composition
// rather than encoding the content again: a node with a module, one with
// nothing assigned (empty lists) and one with two resources.
func TestASendsContentDigestIsTheContentOfWhatItCarries(t *testing.T) {
	ctx := context.Background()
	bm := newBenchMesh(t, true)
	m, err := manifest.Parse([]byte(`{"module":"app","settings":{"port":{"default":"8080"}},"resources":[
	  {"kind":"directory","path":"/etc/app","mode":"0755"},
	  {"kind":"file","path":"/etc/app/app.conf","mode":"0644","template":"node = {{.Node.Name}} <&>\nport = {{.Settings.port}}\n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	bm.Publish(events.ModuleAggregate("app"), events.ModuleRegistered{Module: "app", Build: m.Build(), Manifest: m.Canonical()})
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		bm.Publish(events.NodeAggregate(name), events.NodeEnrolled{Name: name, Capabilities: []string{}, Labels: map[string]string{}})
		if i > 0 {
			bm.Publish(events.NodeAggregate(name), events.ModuleAssigned{Node: name, Module: "app", Build: m.Build(), Settings: map[string]string{"port": fmt.Sprint(8080 + i)}})
		}
	}
	h := bm.fold()
	r, err := h.Push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID()})
	if err != nil || len(r.Sent) != 3 {
		t.Fatalf("push: %v, %+v", err, r)
	}
	for _, p := range r.Sent {
		msg, err := bm.Store.Get(ctx, p.StreamSeq)
		if err != nil {
			t.Fatal(err)
		}
		_, ev, err := events.Decode(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		sent := ev.(events.DeclarationSent)
		var d declaration.Declaration
		if err := json.Unmarshal(sent.Declaration, &d); err != nil {
			t.Fatal(err)
		}
		if want := d.ContentDigest(); sent.ContentDigest != want || want == "" {
			t.Errorf("%s was sent with content digest %q; its declaration's content digests to %q", p.Node, sent.ContentDigest, want)
		}
	}
}
