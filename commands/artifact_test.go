package commands_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// putArtifact uploads data as the operator's command line does and has
// the controller record it under name: its digest.
func (m *closedMesh) putArtifact(name string, data []byte) string {
	m.t.Helper()
	return putArtifactOn(m.t, m.h, name, data)
}

// putArtifactOn is putArtifact on the controller h.
func putArtifactOn(t testing.TB, h *commands.Controller, name string, data []byte) string {
	t.Helper()
	ctx := context.Background()
	digest, size, err := artifact.Hash(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := artifact.Bucket(ctx, h.Core.Store.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: digest}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	r, err := h.Artifacts.PutArtifact(ctx, wire.ArtifactPutRequest{CommandID: wire.NewCommandID(), Name: name, Digest: digest, Size: size})
	if err != nil || r.Upload || !r.Changed {
		t.Fatalf("recording artifact %s: %+v %v", name, r, err)
	}
	return digest
}

// declareArtifact sends node a hand declaration installing digest.
func (m *closedMesh) declareArtifact(node, digest string, size int) {
	m.t.Helper()
	body := fmt.Sprintf(`{"resources":[{"kind":"artifact","path":"/usr/local/bin/tool","mode":"0755","artifact":"tool","digest":%q,"size":%d}]}`, digest, size)
	if _, err := m.h.Push.Declare(context.Background(), wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: node, File: "f.json", Body: body}); err != nil {
		m.t.Fatal(err)
	}
}

// Rule 18 for artifacts, on a real closed bus with a node's own
// credentials: app-1 is handed the object its declaration names, and can
// read no other one, whatever it asks of the bus: the controller to hand
// another digest, an object by name (a direct get of its meta or its
// chunks), the bucket's listing or its stream's information, a consumer
// of its own (with a wildcard filter or none), the consumer of another
// node, or subjects holding literal wildcards where a permission has one.
func TestANodeReadsOnlyTheArtifactsItsDeclarationNames(t *testing.T) {
	t.Parallel()
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	tool := bytes.Repeat([]byte("tool bytes "), 40_000) // several chunks
	other := make([]byte, 300_000)
	rand.Read(other)
	toolDigest := m.putArtifact("tool", tool)
	otherDigest := m.putArtifact("other", other)
	app := m.enrollAndDeclare("app-1")
	m.enrollAndDeclare("db-1")
	m.declareArtifact("app-1", toolDigest, len(tool))
	m.declareArtifact("db-1", otherDigest, len(other))

	var v violations
	nc, err := m.connectAs(app, &v)
	if err != nil {
		t.Fatal(err)
	}
	// Granted: the object its declaration names, whole, checked.
	var got bytes.Buffer
	if err := artifact.Fetch(ctx, nc, "app-1", "/usr/local/bin/tool", toolDigest, int64(len(tool)), &got); err != nil || !bytes.Equal(got.Bytes(), tool) {
		t.Fatalf("app-1 fetching the artifact its declaration names: %d bytes, %v", got.Len(), err)
	}
	// Refused by the controller: another node's artifact, by its digest.
	got.Reset()
	err = artifact.Fetch(ctx, nc, "app-1", "/x", otherDigest, int64(len(other)), &got)
	var no *artifact.RefusedError
	if !errors.As(err, &no) || got.Len() != 0 || !strings.Contains(err.Error(), "installs no artifact") {
		t.Fatalf("app-1 asking for db-1's artifact: %d bytes, %v", got.Len(), err)
	}
	// Refused by the bus: every way to the bucket's stream but its own
	// consumer, and asking in another node's name.
	obs, err := artifact.Bucket(ctx, m.h.Core.Store.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, otherDigest)
	if err != nil {
		t.Fatal(err)
	}
	stream := events.ArtifactStream
	meta := "$O." + events.ArtifactBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(otherDigest))
	chunks := artifact.ChunkSubject(info.NUID)
	refused := []string{
		events.ArtifactSubject("db-1"),                             // asking in db-1's name
		"$JS.API.DIRECT.GET." + stream,                             // any message by sequence
		"$JS.API.DIRECT.GET." + stream + "." + meta,                // an object's meta, by name
		"$JS.API.DIRECT.GET." + stream + "." + chunks,              // its chunks
		"$JS.API.STREAM.INFO." + stream,                            // the stream's information (and subjects)
		"$JS.API.STREAM.MSG.GET." + stream,                         // a message by sequence
		"$JS.API.STREAM.NAMES",                                     // the list of buckets
		"$JS.API.STREAM.LIST",                                      //
		"$JS.API.CONSUMER.LIST." + stream,                          // the consumers, and their filters
		"$JS.API.CONSUMER.NAMES." + stream,                         //
		"$JS.API.CONSUMER.CREATE." + stream,                        // a consumer of its own
		"$JS.API.CONSUMER.CREATE." + stream + ".c." + chunks,       // with a filter
		"$JS.API.CONSUMER.CREATE." + stream + ".c.$O.>",            // with a wildcard filter
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".c",         //
		"$JS.API.CONSUMER.INFO." + stream + ".db-1",                // db-1's consumer
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".db-1",            //
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",               // a literal wildcard where a name goes
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",               //
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".app-1.x",         // deeper than its consumer
		"$JS.API.CONSUMER.DELETE." + stream + ".app-1",             // deleting it, or another's
		"$JS.API.CONSUMER.UPDATE." + stream + ".app-1." + chunks,   // pointing its own at other bytes
		"$JS.API.CONSUMER.CREATE." + stream + ".app-1." + chunks,   //
		"$JS.API.STREAM.PURGE." + stream,                           // the bucket's bytes: not a node's to change
		"$O." + events.ArtifactBucket + ".C.x",                     // nor to write
		"$O." + events.ArtifactBucket + ".M." + meta[len(meta)-8:], //
	}
	for _, subject := range refused {
		if err := nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, fmt.Sprintf("Publish to %q", subject))
	}
	for _, subject := range []string{"$O.>", chunks, "$JS.API.>", "_INBOX_db-1.>"} {
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {}); err == nil {
			v.waitFor(t, fmt.Sprintf("Subscription to %q", subject))
		}
	}
	// Its own consumer, which the controller made for the tool: reading it
	// again gives the tool's chunks, never db-1's bytes.
	js, _ := jetstream.New(nc)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := js.Stream(short, stream); err == nil {
		t.Fatal("app-1 read the bucket's stream information")
	}
	if _, err := js.ObjectStore(short, events.ArtifactBucket); err == nil {
		t.Fatal("app-1 bound to the bucket")
	}
}

// Issue 32 with issue 33's operators, on a real closed bus: an artifact
// put and removed by named admins over their own connections records each
// one's name, which the controller proved from the call's key (the
// request has no field naming anyone), in the event as in its envelope;
// list and show say who put each digest.
func TestAnArtifactRecordsTheOperatorWhoPutIt(t *testing.T) {
	t.Parallel()
	m := newClosedMesh(t, 0)
	ctx := context.Background()
	ada, bo := m.addOperator("ada", events.RoleAdmin), m.addOperator("bo", events.RoleAdmin)
	put := func(o anOperator, data []byte) {
		t.Helper()
		digest, size, err := artifact.Hash(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(o.nc)
		obs, err := artifact.Bucket(ctx, js)
		if err != nil {
			t.Fatalf("%s binding the bucket: %v", o.name, err)
		}
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: digest}, bytes.NewReader(data)); err != nil {
			t.Fatalf("%s uploading: %v", o.name, err)
		}
		var r wire.ArtifactPut
		req := wire.ArtifactPutRequest{CommandID: wire.NewCommandID(), Name: "tool", Digest: digest, Size: size}
		if err := (&client.Client{NC: o.nc}).Call(ctx, wire.SubjectArtifactPut, req, &r); err != nil || !r.Changed {
			t.Fatalf("%s putting tool: %+v %v", o.name, r, err)
		}
	}
	put(ada, bytes.Repeat([]byte("first "), 50_000))
	put(bo, bytes.Repeat([]byte("second "), 50_000))

	var shown wire.ArtifactView
	if err := (&client.Client{NC: ada.nc}).Call(ctx, wire.SubjectArtifactShow, wire.NameRequest{Name: "tool"}, &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown.Versions) != 2 || shown.By != "bo" || shown.Versions[0].By != "ada" || shown.Versions[1].By != "bo" {
		t.Fatalf("artifact show says tool was put by %q, its digests by %+v; want bo, then ada and bo", shown.By, shown.Versions)
	}
	var rm wire.ArtifactRemoved
	if err := (&client.Client{NC: ada.nc}).Call(ctx, wire.SubjectArtifactRemove, wire.ArtifactRemoveRequest{CommandID: wire.NewCommandID(), Name: "tool"}, &rm); err != nil || !rm.Changed {
		t.Fatalf("ada removing tool: %+v %v", rm, err)
	}
	recs, _, err := m.h.Core.Store.Load(ctx, events.ArtifactAggregate("tool"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		switch e := r.Event.(type) {
		case events.ArtifactStored:
			got = append(got, "stored by "+e.By+", envelope "+r.Envelope.By)
		case events.ArtifactRemoved:
			got = append(got, "removed by "+e.By+", envelope "+r.Envelope.By)
		}
	}
	want := []string{"stored by ada, envelope ada", "stored by bo, envelope bo", "removed by ada, envelope ada"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("the log records tool's events as %q, want %q", got, want)
	}
}
