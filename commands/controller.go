package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/meshctl/mesh/artifact"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/commands/access"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/reconcile"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/projections/published"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"
)

// ControllerConfig configures the controller process.
type ControllerConfig struct {
	Home   string // local state: the read models live in Home/projections
	Stream store.StreamConfig
	Log    *slog.Logger
	// Reset folds the read models again from the stream before serving.
	Reset bool
	// PublishEvery is how many events apart the controller publishes a
	// snapshot of its read models to the bus, from which a controller
	// with none starts (0: published.DefaultEvery; negative:
	// never).
	PublishEvery int64
	// Mesh is the mesh's name (default "mesh").
	Mesh string
	// Callout, on a closed bus, is the issuer key the bus was started with:
	// the controller answers the bus's auth callout with it (rule 18), and
	// writes the operator's key into Home for the command line.
	Callout nkeys.KeyPair
	// Lifetime of a connection's permissions on a closed bus (default
	// busauth.DefaultLifetime): how soon a retired node loses the bus.
	Lifetime time.Duration
	// Metrics, when set, is told each verb answered and each push made
	// (web.Metrics exports them); nil: nothing is measured.
	Metrics Metrics
	// RolloutEvery is how often this controller drives the rollouts, the
	// seats' handovers and the ends of rotations' overlaps (default every second; negative: never, for a test that drives them
	// itself). Every controller on a stream drives them: each step is a
	// checked append, so none is taken twice.
	RolloutEvery time.Duration
	// UnreachableAfter is how long a node that said anything may be
	// silent before it is recorded unreachable (0: the default; negative:
	// liveness off, nothing heard or recorded).
	UnreachableAfter time.Duration
	// OpenBus: the bus is open, by the operator's word (mesh serve
	// --open-bus); status says the log's writers are not enforced.
	OpenBus bool
	// Now is the controller's clock (default time.Now): a test moves it
	// past a bound instead of waiting it out.
	Now func() time.Time
	// Cut, on a bus the controller runs (mesh up), drops every connection
	// whose user match accepts: how a flooding node is cut (issue 29). Nil on a cluster,
	// whose connections only end at their lifetime; the node is refused at
	// its next connect either way.
	Cut func(match func(user string) bool) (int, error)
	// Reconcile, with a rate, has the controller send behind nodes their
	// latest declaration by itself (mesh up --reconcile, rule 27); the
	// zero value leaves that to people.
	Reconcile reconcile.Config
	// ArtifactMax is the largest artifact a put takes (mesh up
	// --artifact-max; 0: artifact.DefaultMaxBytes).
	ArtifactMax int64
	// StartWait is how long a start keeps asking a bus that does not
	// answer its lookup of the stream (0: DefaultStartWait; mesh serve
	// and mesh up take --timeout).
	StartWait time.Duration
}

type Metrics = core.Metrics

// Controller is the stream, the read models and the service, running.
type Controller struct {
	Store *store.Store
	Proj  *projections.Engine
	*Services
	svc   micro.Service
	auth  *nats.Subscription // nil on an open bus
	enrol *nats.Subscription // agents holding tokens
	log   *slog.Logger
	// stopDrive ends the rollouts' drive; stopLive the hearing of agents;
	// stopNewest the answering of agents asking for their newest
	// declaration and for their files' content keys; stopGrants the ending of connections whose grant the
	// log took away; stopReconcile the reconciler.
	stopDrive, stopLive, stopNewest, stopGrants, stopReconcile func()
}

// KeepHeapGoal keeps the collector's goal near the controller's live heap
// (core.KeepHeapGoal says how) until stop is called: mesh up and mesh
// serve run it, which import no core.
func KeepHeapGoal() (stop func()) { return core.KeepHeapGoal() }

// StartController asserts the stream, opens and catches up the read models,
// and starts answering verbs. It says what it found and did at each step, and
// returns only when it is ready to answer. A step that fails stops what the
// steps before it started.
func StartController(ctx context.Context, nc *nats.Conn, c ControllerConfig) (*Controller, error) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		// UTC: the times every answer carries (a since, an as-of) are
		// encoded in the clock's zone, and scripts are promised UTC
		// (README, "Scripting"); a local clock would print the box's offset.
		c.Now = func() time.Time { return time.Now().UTC() }
	}
	if c.Mesh == "" {
		c.Mesh = "mesh"
	}
	self, err := openLog(ctx, nc, c)
	if err != nil {
		return nil, err
	}
	flood := access.NewFloodWatch(c.Now)
	proj, err := openReadModels(ctx, self, c, flood.Heard)
	if err != nil {
		self.Secrets.Stop()
		return nil, err
	}
	ctrl := &Controller{Store: self.Store, Proj: proj, log: c.Log,
		Services: NewServices(&core.Core{Self: self, Proj: proj, Now: c.Now, Metrics: c.Metrics}, flood, c.Cut)}
	ctrl.Operators.Closed = c.Callout != nil
	if err := ctrl.serve(ctx, nc, c); err != nil {
		ctrl.Close()
		return nil, err
	}
	c.Log.Info("serving", "service", wire.ServiceName, "version", wire.ServiceVersion, "subjects", wire.CallerPrefix+".>")
	return ctrl, nil
}

// openLog asserts the stream and the secrets stream, and holds the
// controller's key to the log's record of it: what the controller is.
func openLog(ctx context.Context, nc *nats.Conn, c ControllerConfig) (core.Self, error) {
	self := core.Self{Log: c.Log, Mesh: c.Mesh, Replicas: c.Stream.Replicas, OpenBus: c.OpenBus}
	var st *store.Store
	var a store.Assertion
	err := untilAnswered(ctx, c, func(ctx context.Context) (err error) {
		if err = lostStream(ctx, nc, c); err != nil {
			return err
		}
		st, a, err = store.Open(ctx, nc, c.Stream)
		return err
	})
	if err != nil {
		return self, err
	}
	c.Log.Info(a.String())
	// A partial restore is never served (rule 26): the stream says so
	// until the restore's last event has landed.
	if r, err := st.Restoring(ctx); err != nil {
		return self, err
	} else if r != nil {
		return self, fmt.Errorf("stream %s holds a restore that did not finish: %d of %d event(s) landed; run mesh restore with the same backup again to finish it (it resumes), or with --force to start over",
			st.Name(), a.State.LastSeq, r.Messages)
	}
	if self.Key, self.PublicKey, err = loadKey(ctx, c.Home, st); err != nil {
		return self, err
	}
	if self.Signer, err = declaration.NewSigner(self.Key); err != nil {
		return self, err
	}
	c.Log.Info("signing as the controller key", "key", self.PublicKey)
	if self.Keys, err = declaration.NewKeyring(self.Key); err != nil {
		return self, err
	}
	st.MAC = self.Keys.LogMAC()
	// The live fold reads through this store: each send a push appends
	// is handed to it as decoded when it reads the same bytes back.
	st.RememberSends = true
	self.Store = st
	keep, said, err := secrets.Assert(ctx, st.JetStream(), c.Stream.Replicas, self.Keys.Settings())
	if err != nil {
		return self, err
	}
	c.Log.Info(said)
	self.Secrets = keep
	return self, nil
}

// openReadModels opens this home's read models (folding them again when
// they are not the stream's) and catches them up with the stream, each
// report folded told to heard.
func openReadModels(ctx context.Context, self core.Self, c ControllerConfig, heard func(projections.Heard)) (*projections.Engine, error) {
	log := c.Log
	publish := uint64(published.DefaultEvery)
	switch {
	case c.PublishEvery < 0:
		publish = 0
	case c.PublishEvery > 0:
		publish = uint64(c.PublishEvery)
	}
	// What is published is the newest snapshot kept for time travel: one
	// is kept at least as often as one is published.
	snapEvery := uint64(projections.DefaultSnapshotEvery)
	if publish > 0 {
		snapEvery = min(snapEvery, publish)
	}
	opts := projections.Options{Dir: filepath.Join(c.Home, "projections"), Store: self.Store, Log: log, Reset: c.Reset, Keys: self.Keys,
		SnapshotEvery: snapEvery, PublishEvery: publish, PublishAfter: published.DefaultAfter, FromPublished: true, Heard: heard}
	proj, o, err := projections.Open(ctx, opts)
	if errors.Is(err, projections.ErrForeignStream) || errors.Is(err, projections.ErrRewound) {
		// Read models that do not belong to the stream (a restore, a reset
		// bus, a lost tail) are never served: they are folded again, and
		// the start says why.
		log.Warn(err.Error() + "; rebuilding them from the stream before serving")
		opts.Reset = true
		proj, o, err = projections.Open(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case o.FromSnapshot > 0:
		log.Info("projections: none in this home yet; starting from the snapshot on the bus and folding the rest of the stream", "generation", o.Generation, "snapshot_holds", o.FromSnapshot, "events", o.Stream.LastSeq)
	case o.Fresh:
		log.Info("projections: none in this home yet; folding them from the stream", "generation", o.Generation, "events", o.Stream.LastSeq)
	default:
		log.Info("projections found", "generation", o.Generation, "nodes", o.Nodes, "folded", o.Checkpoint, "of", o.Stream.LastSeq)
	}
	start := time.Now()
	proj.Start()
	if o.Stream.LastSeq <= o.Checkpoint {
		log.Info("projections are current with the stream")
		return proj, nil
	}
	stop := logProgress(log, proj, o.Stream.LastSeq)
	restoreGC := core.FoldingGC()
	err = proj.WaitFor(ctx, o.Stream.LastSeq)
	restoreGC()
	stop()
	var fe *projections.FoldError
	switch {
	case errors.As(err, &fe):
		// Never a wedged start (rule 19): the controller serves what it
		// has folded, refuses writes, and status says why.
		log.Error("the fold stopped: serving the read models as folded, and refusing writes", "why", core.Refusal(fe), "folded", proj.Checkpoint())
	case err != nil:
		proj.Close()
		return nil, err
	default:
		log.Info("projections caught up", "folded", o.Stream.LastSeq-o.Checkpoint, "took", time.Since(start).Round(time.Millisecond))
	}
	return proj, nil
}

// serve starts each part that answers or acts: the modules' streams, the
// verbs, the answers to agents, enrolment, liveness, the drives, and on a
// closed bus the callout and the end of connections the log takes a grant
// from. What it started is in ctrl, which Close stops.
func (ctrl *Controller) serve(ctx context.Context, nc *nats.Conn, c ControllerConfig) error {
	h, log := ctrl.Services, c.Log
	asserted, err := h.Modules.AssertStreams(ctx, c.Stream.Replicas)
	if err != nil {
		return err
	}
	for _, line := range asserted {
		log.Info(line)
	}
	// The artifacts' bucket (issue 32), asserted like the streams (rule 15).
	if _, err := artifact.Assert(ctx, h.Core.Store.JetStream(), c.Stream.Replicas); err != nil {
		return err
	}
	if c.ArtifactMax > 0 {
		h.Artifacts.MaxBytes = c.ArtifactMax
	}
	if ctrl.svc, err = Serve(nc, h); err != nil {
		return fmt.Errorf("cannot start the %s service: %w", wire.ServiceName, err)
	}
	stopNewest, err := serveNewest(h)
	if err != nil {
		return err
	}
	ctrl.stopNewest = stopNewest
	stopKeys, err := serveContentKeys(h)
	if err != nil {
		return err
	}
	stopArtifacts, err := serveArtifacts(h)
	if err != nil {
		stopKeys()
		return err
	}
	// All three answer agents, and stop together.
	ctrl.stopNewest = func() { stopNewest(); stopKeys(); stopArtifacts() }
	// Ready means reachable: until the server has the service's
	// subscriptions, a client's request would meet "no responders".
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("cannot reach the bus to start the %s service: %w", wire.ServiceName, err)
	}
	if ctrl.enrol, err = h.Access.ServeEnrol(nc); err != nil {
		return err
	}
	if ctrl.stopLive, err = h.Live.Start(c.UnreachableAfter, 0); err != nil {
		return err
	}
	ctrl.stopDrive = driveRollouts(h, c.RolloutEvery)
	ctrl.stopReconcile = h.Reconcile.Start(c.Reconcile)
	// What every node would be sent, composed once now rather than by the
	// operator's first status or push: at 100,000 nodes that first status
	// took 1.0 s, against 0.2-0.26 s once composed. A controller closed
	// meanwhile answers an error here, which nobody needs to hear.
	go h.World.ComposeAll()
	if c.Callout == nil {
		return nil
	}
	kp := h.Core.Key
	// The first admin, whose key the home keeps: the README's commands
	// work on a closed bus with nothing more (issue 33).
	admin, err := busauth.OperatorKey(kp)
	if err != nil {
		return err
	}
	adminKey, _ := admin.PublicKey()
	if made, err := h.Operators.EnsureAdmin(ctx, adminKey); err != nil {
		log.Warn("cannot make the mesh's first admin; no operator can connect until one is", "err", err)
	} else if made {
		log.Info("made the mesh's first operator", "name", events.AdminName, "role", events.RoleAdmin, "key", filepath.Join(c.Home, busauth.OperatorKeyFile))
	}
	callout := busauth.Callout{Directory: h.Access.Directory(), Controller: kp, Issuer: c.Callout, Lifetime: c.Lifetime, Log: log}
	if ctrl.auth, err = busauth.Serve(nc, callout); err != nil {
		return err
	}
	if err := busauth.WriteOperatorKey(c.Home, kp); err != nil {
		return err
	}
	// Its own connection is decided by the callout just served.
	if ctrl.stopGrants, err = h.Access.Guard(nc, kp); err != nil {
		return err
	}
	log.Info("the bus is closed: nodes connect with their join strings, the command line with an operator's key", "admin_key", filepath.Join(c.Home, busauth.OperatorKeyFile))
	return nil
}

// Close stops answering, then stops folding; it stops only what the start
// got as far as starting.
func (c *Controller) Close() error {
	for _, stop := range []func(){c.stopReconcile, c.stopDrive, c.stopLive, c.stopNewest, c.stopGrants} {
		if stop != nil {
			stop()
		}
	}
	if c.auth != nil {
		_ = c.auth.Unsubscribe()
	}
	if c.enrol != nil {
		_ = c.enrol.Unsubscribe()
	}
	if c.svc != nil {
		_ = c.svc.Stop()
	}
	c.Core.Secrets.Stop()
	return c.Proj.Close()
}

// driveRollouts drives the rollouts, the seats' handovers and the ends of
// rotations' overlaps every interval until stopped.
func driveRollouts(h *Services, every time.Duration) func() {
	if every < 0 {
		return func() {}
	}
	return h.Core.TickUntilStopped(cmp.Or(every, time.Second), "cannot drive a rollout; trying again", func(ctx context.Context) error {
		return errors.Join(h.Rollouts.DriveRollouts(ctx), h.Seats.DriveSeats(ctx), h.Network.DriveNetwork(ctx), h.Credentials.DriveRotations(ctx))
	})
}

// logProgress says every few seconds how far a long catch-up has come, so a
// start folding millions of events does not look hung.
func logProgress(log *slog.Logger, proj *projections.Engine, target uint64) func() {
	return core.Every(3*time.Second, func() {
		log.Info("projections catching up", "folded", proj.Checkpoint(), "of", target)
	})
}

// lostStream refuses to start an empty mesh in place of one the bus lost
// (issue 12: the bus's data directory removed, and the restart quietly made
// an empty mesh that status called well): when the bus has no stream but
// this home's read models were folded from one, that stream is gone, and
// creating a new one would serve nothing as if it were the mesh. Reset
// (mesh up --rebuild) is the person's word that an empty mesh is wanted.
func lostStream(ctx context.Context, nc *nats.Conn, c ControllerConfig) error {
	if c.Reset {
		return nil
	}
	name := c.Stream.Name
	if name == "" {
		name = events.Stream
	}
	exists, err := store.Exists(ctx, nc, name)
	if err != nil || exists {
		return err
	}
	f, found, err := projections.Peek(filepath.Join(c.Home, "projections"))
	if err != nil || !found || f.Checkpoint == 0 {
		return err
	}
	return fmt.Errorf("the bus has no stream %s, but this home's read models were folded from stream %s created %s, up to event %d: the bus's data is lost, or this is another bus; restore a backup (mesh restore), or start with --rebuild to begin an empty mesh in its place",
		name, f.Stream, f.Created.UTC().Format(time.RFC3339), f.Checkpoint)
}
