package modules_test

import (
	"context"
	"testing"

	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A start asserts what registered modules need of the bus: the state
// bucket of a module that runs and the work queue of a seat a build claims,
// made again when they are gone (a bus restored without them). Fails when
// the start skips either.
func TestAStartMakesModulesStreamsAgain(t *testing.T) {
	ctx := context.Background()
	srv := embeddedtest.Server(t)
	home := t.TempDir()
	ctrl, nc := commandstest.StartOn(t, srv, home)
	_, err := ctrl.Modules.RegisterModule(ctx, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "builder.json",
		Manifest: `{"module":"builder","claims":["builder"],"run":{"command":"/bin/true"}}`})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(embeddedtest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, events.StateBucket("builder")); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, events.SeatStream("builder")); err != nil {
		t.Fatal(err)
	}
	ctrl.Close()
	nc.Close()
	ctrl, nc = commandstest.StartOn(t, srv, home)
	defer nc.Close()
	defer ctrl.Close()
	if _, err := js.KeyValue(ctx, events.StateBucket("builder")); err != nil {
		t.Errorf("the running module's state bucket after a start: %v", err)
	}
	if _, err := js.Stream(ctx, events.SeatStream("builder")); err != nil {
		t.Errorf("the claimed seat's work queue after a start: %v", err)
	}
}
