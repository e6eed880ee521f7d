package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/commands/liveness"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/web"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// UpCmd runs a whole mesh in one process.
type UpCmd struct {
	Listen          string `default:"127.0.0.1:4222" help:"Where the embedded bus listens (host:port). Loopback by default: nothing off this machine can reach it."`
	Rebuild         bool   `help:"Fold the read models again from the stream before serving (the remedy when they belong to another stream)."`
	Node            string `help:"Also run an agent for this machine as node NAME (enrolled if it is not yet)."`
	Root            string `help:"With --node: the directory the local agent applies under."`
	controllerFlags `embed:""`
	TLS             bool `name:"tls" help:"Speak TLS to everything on the network: a CA and a server certificate are made in HOME/tls (the CA once: join strings carry it)."`
	// Insecure allows a bus on the network in clear, said to be so.
	Insecure bool `help:"Allow --listen on an address other machines reach without --tls: join strings and declarations then cross the network in clear."`
	// BusMonitor serves the embedded bus's own monitoring endpoints.
	BusMonitor string `name:"bus-monitor" help:"Also serve the embedded bus's monitoring endpoints (/varz, /connz, /jsz) on this host:port."`
}

// controllerFlags are the flags mesh up and mesh serve share: how the
// controller in either runs. Embedded in both, in this order, so their
// help lists them alike.
type controllerFlags struct {
	Memory  memoryFlag    `embed:""`
	HTTP    httpFlag      `embed:""`
	Live    liveFlag      `embed:""`
	Art     artifactFlag  `embed:""`
	Recon   reconcileFlag `embed:""`
	Publish publishFlag   `embed:""`
}

// config checks every shared flag before anything starts, so a bad one is
// said before a bus or a lock is taken, and answers the controller's
// settings they make.
func (f controllerFlags) config() (commands.ControllerConfig, error) {
	var c commands.ControllerConfig
	var err error
	if c.UnreachableAfter, err = f.Live.bound(); err != nil {
		return c, err
	}
	if c.Reconcile, err = f.Recon.config(); err != nil {
		return c, err
	}
	if c.PublishEvery, err = f.Publish.every(); err != nil {
		return c, err
	}
	if c.ArtifactMax, err = f.Art.bytes(); err != nil {
		return c, err
	}
	_, err = f.HTTP.options()
	return c, err
}

// serveUntilDone starts the controller's HTTP, says it is ready (to the
// log and to systemd) and serves until ctx ends.
func (f controllerFlags) serveUntilDone(ctx context.Context, ctrl *commands.Controller, metrics *web.Metrics, log *slog.Logger, ready string, attrs ...any) error {
	stopHTTP, err := f.HTTP.start(ctrl, metrics, log)
	if err != nil {
		return err
	}
	defer stopHTTP()
	log.Info(ready, attrs...)
	if err := notifyReady(); err != nil {
		log.Warn("cannot tell systemd this service is ready", "err", err)
	}
	<-ctx.Done()
	return nil
}

// publishFlag is how often the controller publishes a snapshot of its read
// models to the bus, for a controller with none to start from.
type publishFlag struct {
	PublishEvery int64 `name:"publish-snapshot-every" default:"100000" placeholder:"EVENTS" help:"Publish a snapshot of the read models to the bus every this many events folded: a controller in a new or lost home starts from the newest and folds only the rest (0: never)."`
}

// every is the flag as StartController takes it (negative: never).
func (f publishFlag) every() (int64, error) {
	switch {
	case f.PublishEvery < 0:
		return 0, cmdline.Usagef("--publish-snapshot-every %d: give a number of events, or 0 for never", f.PublishEvery)
	case f.PublishEvery == 0:
		return -1, nil
	}
	return f.PublishEvery, nil
}

// artifactFlag bounds an artifact's size (issue 32): a put over it is
// refused naming its size and the bound, before a byte is uploaded.
type artifactFlag struct {
	ArtifactMaxMiB int64 `name:"artifact-max-mib" default:"512" help:"The largest artifact mesh artifact put may store, in MiB (a program's binary, an archive: not a disk image)."`
}

// bytes is the bound as StartController takes it.
func (f artifactFlag) bytes() (int64, error) {
	if f.ArtifactMaxMiB < 1 {
		return 0, cmdline.Usagef("--artifact-max-mib %d: give at least 1", f.ArtifactMaxMiB)
	}
	return f.ArtifactMaxMiB << 20, nil
}

// liveFlag is how long a node may be silent before it is unreachable.
type liveFlag struct {
	UnreachableAfter string `name:"unreachable-after" default:"20s" help:"A node whose agent said anything and is then silent this long is unreachable: status is not well and names it (at least 10s; 'off' records nothing)."`
}

// bound is the flag as StartController takes it (negative: off).
func (f liveFlag) bound() (time.Duration, error) {
	if f.UnreachableAfter == "off" {
		return -1, nil
	}
	d, err := time.ParseDuration(f.UnreachableAfter)
	if err != nil || d < liveness.MinUnreachableAfter {
		return 0, cmdline.Usagef("--unreachable-after %s: give a duration of at least %s (two of an agent's beats), such as 30s, or off", f.UnreachableAfter, liveness.MinUnreachableAfter)
	}
	return d, nil
}

// memoryFlag is the process's soft memory limit. Measured, not guessed: a
// limit under what the process needs makes Go's collector run without
// pause, and a fixed 160 MiB did exactly that at fleet size (a fold of 1M
// real events needs 520-580 MiB; the embedded bus holding 10,000 agents'
// connections needs 750 MiB, 410 of it their goroutines' stacks), halving
// throughput and timing out agents' reports. The limit is therefore a
// guard against running out of memory, not a diet: by default three
// quarters of what the machine (or its cgroup) gives the process, under
// which the collector paces itself as usual. GOMEMLIMIT, when set, wins.
type memoryFlag struct {
	MemoryLimit string `default:"auto" help:"Soft memory limit of this process: MiB, 'auto' (three quarters of the machine's or cgroup's memory) or 'none'. GOMEMLIMIT overrides."`
}

func (m memoryFlag) apply(log *slog.Logger) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	var limit int64
	switch m.MemoryLimit {
	case "none", "0":
		return nil
	case "auto", "":
		avail := availableMemory()
		if avail <= 0 {
			log.Info("no soft memory limit: the machine's memory could not be read (--memory-limit MiB sets one)")
			return nil
		}
		limit = avail / 4 * 3
	default:
		mib, err := strconv.ParseInt(m.MemoryLimit, 10, 64)
		if err != nil || mib < 0 {
			return cmdline.Usagef("--memory-limit %q is not a number of MiB, auto or none", m.MemoryLimit)
		}
		limit = mib << 20
	}
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit (--memory-limit)", "mib", limit>>20)
	return nil
}

// availableMemory is the memory this process may use: its cgroup's limit
// when it has one, else the machine's; 0 when neither can be read.
func availableMemory() int64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func (u *UpCmd) Help() string {
	return `Examples:
  mesh up                         # bus on 127.0.0.1:4222, state in ./.mesh
  mesh up --home /srv/mesh --listen 0.0.0.0:4222`
}

func (u *UpCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if g.Bus != "" {
		return cmdline.Usagef("mesh up runs its own bus on --listen; --bus is for mesh serve and the client commands")
	}
	if (u.Node == "") != (u.Root == "") {
		return cmdline.Usagef("--node and --root go together: mesh up --node NAME --root DIR runs an agent for this machine")
	}
	cfg, err := u.config()
	if err != nil {
		return err
	}
	host, port, err := cmdline.SplitListen(u.Listen)
	if err != nil {
		return err
	}
	if !u.TLS && !u.Insecure && !Loopback(host) {
		return cmdline.Usagef("--listen %s reaches other machines, and without TLS every join string and declaration crosses the network in clear: give --tls (or --insecure to do it anyway)", u.Listen)
	}
	release, err := cmdline.LockHome(g.Home, "this mesh up")
	if err != nil {
		return err
	}
	defer release()
	log := g.Logger(out.Err)
	if err := u.Memory.apply(log); err != nil {
		return err
	}
	defer commands.KeepHeapGoal()()
	dataDir := filepath.Join(g.Home, "nats")
	// A closed bus (rule 18): the controller decides every other connection.
	keys, err := busauth.NewBusKeys()
	if err != nil {
		return err
	}
	var secure *tls.Config
	if u.TLS {
		var said string
		if secure, _, said, err = embedded.EnsureTLS(filepath.Join(g.Home, "tls"), tlsHosts(host)); err != nil {
			return err
		}
		log.Info(said)
	}
	srv, err := embedded.Start(ctx, embedded.Options{Dir: dataDir, Host: host, Port: port, Auth: embedded.AuthOf(keys.Public()), Monitor: u.BusMonitor, TLS: secure})
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("bus listening", "url", srv.ClientURL(), "data", dataDir)
	if u.BusMonitor != "" {
		log.Info("bus monitoring", "url", "http://"+u.BusMonitor+"/varz")
	}
	// In-process: the controller's own traffic never touches the network.
	nc, err := srv.Connect(nats.Name("mesh controller"), keys.ControllerOption())
	if err != nil {
		return fmt.Errorf("cannot connect the controller to the embedded bus: %w", err)
	}
	defer nc.Close()
	metrics := web.NewMetrics()
	cfg.Home, cfg.Log, cfg.Reset, cfg.Callout, cfg.Metrics, cfg.Cut = g.Home, log, u.Rebuild, keys.Issuer, metrics, srv.CutUsers
	cfg.StartWait = g.Timeout // --timeout bounds the wait for a silent bus (commands.DefaultStartWait)
	ctrl, err := commands.StartController(ctx, nc, cfg)
	if err != nil {
		return err
	}
	defer ctrl.Close()
	// A full disk: said once, writes refused at once, and storing again by
	// itself once there is room (issue 12).
	go srv.KeepStorage(ctx, log, ctrl.Core.SetBusTrouble)
	// With TLS the server names its URL tls://, which makes the commands
	// of this home insist on it.
	if err := cmdline.WriteBusRecord(g.Home, srv.ClientURL()); err != nil {
		return err
	}
	defer os.Remove(cmdline.BusRecordPath(g.Home))
	if u.Node != "" {
		stop, err := localAgent(ctx, srv, ctrl, u.Node, u.Root, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := u.serveUntilDone(ctx, ctrl, metrics, log, "ready: in another terminal, mesh node enroll NAME; Ctrl-C stops", "bus_record", cmdline.BusRecordPath(g.Home)); err != nil {
		return err
	}
	log.Info("stopping: controller, then bus")
	return nil
}

// ServeCmd runs the controller alone against an existing bus.
type ServeCmd struct {
	Replicas        int  `default:"1" help:"Replicas of the event stream: 3 on a NATS cluster."`
	Closed          bool `help:"The bus is closed as mesh bus-config prints: connect as the controller's user and decide every other connection (a node only hears its own)."`
	OpenBus         bool `name:"open-bus" help:"Serve a bus nobody closed, knowing anyone who reaches it may write to the log (status says so); without --closed, mesh serve needs it."`
	Rebuild         bool `help:"Fold the read models again from the stream before serving."`
	controllerFlags `embed:""`
}

func (s *ServeCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	addr, err := g.ResolveBus(true)
	if err != nil {
		return err
	}
	if s.Replicas < 1 {
		return cmdline.Usagef("--replicas %d: a stream needs at least 1 replica (3 on a cluster)", s.Replicas)
	}
	// An open bus lets anyone who reaches it ack foreign messages, assign
	// modules or delete the stream (issue 29): serving one is a choice the
	// operator says, never what happens for want of a flag.
	switch {
	case s.Closed && s.OpenBus:
		return cmdline.Usagef("--closed and --open-bus contradict each other: give --closed for a bus closed with mesh bus-config, or --open-bus for one nobody closed")
	case !s.Closed && !s.OpenBus:
		return cmdline.Usagef("mesh serve needs --closed (put what mesh bus-config prints into every server's configuration) or, to serve a bus anyone who reaches it may write to, --open-bus")
	}
	cfg, err := s.config()
	if err != nil {
		return err
	}
	release, err := cmdline.LockHome(g.Home, "this mesh serve")
	if err != nil {
		return err
	}
	defer release()
	log := g.Logger(out.Err)
	if err := s.Memory.apply(log); err != nil {
		return err
	}
	defer commands.KeepHeapGoal()()
	var callout nkeys.KeyPair
	var nc *nats.Conn
	if s.Closed {
		keys, err := clusterKeys(g.Home, false)
		if err != nil {
			return err
		}
		callout = keys.Issuer
		nc, err = cmdline.Connect(addr, "mesh controller", keys.ControllerOption(), nats.MaxReconnects(-1))
		if errors.Is(err, nats.ErrAuthorization) {
			return fmt.Errorf("the bus at %s refused the controller's user: configure every server with what mesh bus-config prints for this home", addr)
		}
		if err != nil {
			return err
		}
	} else if nc, err = g.Dial(addr, "mesh controller", nats.MaxReconnects(-1)); err != nil {
		return err
	}
	defer nc.Close()
	log.Info("connected to the bus", "bus", addr.String())
	if s.OpenBus {
		log.Warn("the bus is open (--open-bus): the log's writers are not enforced; close it with mesh bus-config and --closed")
	}
	metrics := web.NewMetrics()
	cfg.Home, cfg.Log, cfg.Reset, cfg.Stream, cfg.Callout, cfg.Metrics, cfg.OpenBus = g.Home, log, s.Rebuild, store.StreamConfig{Replicas: s.Replicas}, callout, metrics, s.OpenBus
	cfg.StartWait = g.Timeout
	ctrl, err := commands.StartController(ctx, nc, cfg)
	if err != nil {
		return err
	}
	defer ctrl.Close()
	if err := s.serveUntilDone(ctx, ctrl, metrics, log, "ready; Ctrl-C stops"); err != nil {
		return err
	}
	log.Info("stopping")
	return nil
}

// loopback: host is reached from this machine only.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsHosts are the names the bus's certificate covers: what it listens on
// (every address of this machine when that is all of them), loopback, and
// the machine's name.
func tlsHosts(host string) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && ip.IsUnspecified():
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	default:
		hosts = append(hosts, host)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// localAgent enrolls node if needed and runs its agent in this process, on
// its own in-process connection, until stop is called.
func localAgent(ctx context.Context, srv *embedded.Server, ctrl *commands.Controller, node, root string, log *slog.Logger) (func(), error) {
	h := ctrl
	_, err := h.Nodes.Enroll(ctx, wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: node})
	switch {
	case errors.Is(err, aggregates.ErrNameTaken):
		if err := h.Core.ActiveNode(ctx, "run an agent for", node); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		log.Info("enrolled for the local agent", "node", node)
	}
	token, err := h.Access.LocalToken(ctx, node)
	if err != nil {
		return nil, err
	}
	j := agent.Join{Mesh: h.Core.Mesh, Bus: srv.ClientURL(), Node: node, Key: h.Core.PublicKey, Token: token}
	if j, err = agent.Enrol(ctx, j, agent.StateDir(root, ""), func(o ...nats.Option) (*nats.Conn, error) { return srv.Connect(o...) }, log); err != nil {
		return nil, err
	}
	identity, err := j.Options()
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect(append(identity, nats.Name("mesh agent "+node))...)
	if err != nil {
		return nil, err
	}
	a, err := agent.Open(ctx, nc, agent.Config{Join: j, Root: root, Log: log})
	if err != nil {
		nc.Close()
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(actx); err != nil {
			log.Error("local agent stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done; a.Close(); nc.Close() }, nil
}

// BusConfigCmd prints the configuration that closes a NATS cluster for this
// mesh, creating the controller key when the home has none.
type BusConfigCmd struct{}

func (c *BusConfigCmd) Help() string {
	return `Put the block it prints into every server's configuration, then run the controller with
mesh serve --closed against that cluster. It names keys derived from the controller key in
--home, so it prints the same block every time for the same key.

Examples:
  mesh bus-config > mesh-auth.conf   # include it in every server's configuration`
}

func (c *BusConfigCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	keys, err := clusterKeys(g.Home, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out.Err, "the authorization block for every server of the cluster, for the controller key in %s:\n", filepath.Join(g.Home, commands.KeyFile))
	fmt.Fprint(out.Out, keys.ServerConfig())
	fmt.Fprintln(out.Err, "then: mesh serve --closed --replicas 3, with --bus or MESH_NATS_URL naming the cluster")
	return nil
}

// clusterKeys are the closed-cluster keys of the controller key in home.
func clusterKeys(home string, create bool) (busauth.BusKeys, error) {
	key, err := busauth.HomeKey(home, create)
	if err != nil {
		return busauth.BusKeys{}, err
	}
	return busauth.ClusterBusKeys(key)
}
