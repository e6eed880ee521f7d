package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// UpCmd runs a whole mesh in one process.
type UpCmd struct {
	Listen  string `default:"127.0.0.1:4222" help:"Where the embedded bus listens (host:port). Loopback by default: nothing off this machine can reach it."`
	Rebuild bool   `help:"Fold the read models again from the stream before serving (the remedy when they belong to another stream)."`
}

func (u *UpCmd) Help() string {
	return `Examples:
  mesh up                         # bus on 127.0.0.1:4222, state in ./.mesh
  mesh up --home /srv/mesh --listen 0.0.0.0:4222`
}

func (u *UpCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	if g.Bus != "" {
		return usagef("mesh up runs its own bus on --listen; --bus is for mesh serve and the client commands")
	}
	host, port, err := splitListen(u.Listen)
	if err != nil {
		return err
	}
	release, err := lockHome(g.Home, "this mesh up")
	if err != nil {
		return err
	}
	defer release()
	log := newLogger(out.Err)
	dataDir := filepath.Join(g.Home, "nats")
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dataDir, Host: host, Port: port})
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info(fmt.Sprintf("bus listening on %s (JetStream data in %s)", srv.ClientURL(), dataDir))
	// In-process: the controller's own traffic never touches the network.
	nc, err := srv.Connect(nats.Name("mesh controller"))
	if err != nil {
		return fmt.Errorf("cannot connect the controller to the embedded bus: %w", err)
	}
	defer nc.Close()
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{Home: g.Home, Log: log, Reset: u.Rebuild})
	if err != nil {
		return err
	}
	defer ctrl.Close()
	if err := writeBusRecord(g.Home, srv.ClientURL()); err != nil {
		return err
	}
	defer os.Remove(busRecordPath(g.Home))
	log.Info(fmt.Sprintf("ready: in another terminal, mesh node enroll NAME (commands find this bus through %s); Ctrl-C stops", busRecordPath(g.Home)))
	<-ctx.Done()
	log.Info("stopping: controller, then bus")
	return nil
}

// ServeCmd runs the controller alone against an existing bus.
type ServeCmd struct {
	Replicas int  `default:"1" help:"Replicas of the event stream: 3 on a NATS cluster."`
	Rebuild  bool `help:"Fold the read models again from the stream before serving."`
}

func (s *ServeCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	addr, err := g.resolveBus(true)
	if err != nil {
		return err
	}
	if s.Replicas < 1 {
		return usagef("--replicas %d: a stream needs at least 1 replica (3 on a cluster)", s.Replicas)
	}
	release, err := lockHome(g.Home, "this mesh serve")
	if err != nil {
		return err
	}
	defer release()
	log := newLogger(out.Err)
	nc, err := connect(addr, "mesh controller", nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	log.Info("connected to the bus at " + addr.String())
	ctrl, err := commands.StartController(ctx, nc, commands.ControllerConfig{
		Home: g.Home, Log: log, Reset: s.Rebuild, Stream: store.StreamConfig{Replicas: s.Replicas},
	})
	if err != nil {
		return err
	}
	defer ctrl.Close()
	log.Info("ready; Ctrl-C stops")
	<-ctx.Done()
	log.Info("stopping")
	return nil
}
