package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// AuthTimeout is how long the bus waits for the controller's callout to
// decide a connection before refusing it.
const AuthTimeout = 10 * time.Second

// Options configure one embedded server.
type Options struct {
	// Dir holds JetStream's data. Required: a mesh's log must survive a restart.
	Dir string
	// Host and Port are where clients connect. Host defaults to 127.0.0.1, so a
	// single-box mesh is not reachable from the network unless asked. Port -1
	// picks a free port; 0 means the NATS default, 4222.
	Host string
	Port int
	// ServerName must be unique and stable within a cluster.
	ServerName string
	// Cluster, when set, makes this server a member of a NATS cluster.
	Cluster *Cluster
	// SyncAlways fsyncs every write. Off by default: see docs/faults.md, "Durability".
	SyncAlways bool
	// ReadyTimeout bounds the wait for the server to be ready (default 10s).
	ReadyTimeout time.Duration
	// InProcessOnly opens no listener: only Connect reaches the server. For a
	// bus started for one job in this process (mesh restore), which nothing
	// else should reach while it runs.
	InProcessOnly bool
	// TLS, when set, makes clients on the network speak TLS (mesh up
	// --tls); connections in this process need none.
	TLS *tls.Config
	// Monitor, when set (host:port), serves the bus's own monitoring
	// endpoints (/varz, /connz, /jsz) there: what nats-server's users
	// look at, on request only.
	Monitor string
	// MaxStore bounds JetStream's file storage in bytes (0: the server's
	// default, a share of the disk). A bus at its limit refuses to store,
	// as one on a full disk does.
	MaxStore int64
	// Auth, when set, closes the bus: only the controller's own user connects
	// of itself, and every other connection is decided by the controller's
	// auth callout, which tells each one what it may do (rule 18).
	Auth *Auth
}

// AuthOf is the configuration of a bus closed for an issuer and a
// controller key (busauth.BusKeys.Public answers them).
func AuthOf(issuer, controller string) *Auth { return &Auth{Issuer: issuer, Controller: controller} }

// Auth is a closed bus's configuration.
type Auth struct {
	// Issuer is the account public key the callout's answers are signed with.
	Issuer string
	// Controller is the user public nkey that connects without the callout:
	// the controller itself, which answers the callout.
	Controller string
}

// Cluster places a server in a NATS cluster.
type Cluster struct {
	Name   string
	Host   string
	Port   int // -1 picks a free port
	Routes []*url.URL
}

// Server is a running embedded nats-server.
type Server struct {
	ns  *server.Server
	dir string // JetStream's data directory
}

// Start runs a server and returns once it accepts connections and its
// JetStream is healthy (in a cluster: once this server's JetStream answers).
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded: cannot start a server without a data directory")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ServerName == "" {
		o.ServerName = "mesh"
	}
	if o.ReadyTimeout == 0 {
		// A ceiling, not an expectation: on a loaded two-core machine (the
		// test suite beside a fleet of 2,000 agents) a cluster member took
		// over 10 s to listen.
		o.ReadyTimeout = 30 * time.Second
	}
	opts := &server.Options{
		ServerName:        o.ServerName,
		Host:              o.Host,
		Port:              o.Port,
		JetStream:         true,
		StoreDir:          o.Dir,
		SyncAlways:        o.SyncAlways,
		JetStreamMaxStore: o.MaxStore,
		// NoSigs: the mesh process owns signal handling, and Ctrl-C must stop
		// the controller before the bus, not the bus underneath it.
		NoSigs:     true,
		NoLog:      true,
		DontListen: o.InProcessOnly,
		// The server's first ping to a client comes two seconds after its
		// CONNECT, even while a closed bus still waits for the controller's
		// callout on it; nats.go then fails the handshake ("expected 'PONG',
		// got 'PING'"). On a loaded box a callout can take that long (one of
		// 2,000 fleet agents, or a command beside a busy controller): the
		// first ping comes after the usual interval instead.
		DisableShortFirstPing: true,
		// How long a connection waits for the controller's callout to
		// decide it, where nats-server's default is two seconds: a
		// callout slower than that on a loaded box refused a node as if
		// it were retired (one of 500 fleet agents in a CI run beside four
		// others). The mesh's agents wait as long (cmdline.AgentConnectTimeout).
		AuthTimeout: AuthTimeout.Seconds(),
		// No cache of subject matches: the mesh's traffic names a node in
		// nearly every subject (its declaration, its republish, its
		// report, the reply each acknowledgement goes to), so in a push
		// to 10,000 nodes almost every match is new to a cache the server
		// keeps at 1,024 entries: it inserted each under a write lock and
		// swept it out again. Off, a match reads the tree under a read
		// lock and keeps nothing; the routing's share of the bus's CPU in
		// a push fell from 3.5 to 2.4 µs a message (docs/performance.md,
		// "The one cut: no subject cache"), a gain too small for
		// BenchmarkRoutingManySubjects to tell from two identical buses.
		// It changes which lock a match takes and what /subsz reports of
		// the cache, not what a match finds. Turning it back on costs the
		// bus that churn again, nothing else.
		NoSublistCache: true,
	}
	if o.TLS != nil {
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = o.TLS, true, 5
	}
	if o.Monitor != "" {
		host, port, err := net.SplitHostPort(o.Monitor)
		if err != nil {
			return nil, fmt.Errorf("embedded: --bus-monitor %s is not host:port: %w", o.Monitor, err)
		}
		if opts.HTTPPort, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("embedded: --bus-monitor %s has no port number", o.Monitor)
		}
		opts.HTTPHost = host
	}
	if a := o.Auth; a != nil {
		// The controller's user has no permissions set: it may do anything,
		// which includes answering $SYS.REQ.USER.AUTH in the global account.
		opts.Nkeys = []*server.NkeyUser{{Nkey: a.Controller}}
		opts.AuthCallout = &server.AuthCallout{Issuer: a.Issuer, AuthUsers: []string{a.Controller}}
	}
	if o.Cluster != nil {
		opts.Cluster = server.ClusterOpts{Name: o.Cluster.Name, Host: o.Cluster.Host, Port: o.Cluster.Port}
		opts.Routes = o.Cluster.Routes
	}
	if o.Port != -1 && o.Port != 0 && !o.InProcessOnly {
		if err := portFree(o.Host, o.Port); err != nil {
			return nil, err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: cannot configure the bus: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(o.ReadyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded: the bus on %s did not become ready within %s", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), o.ReadyTimeout)
	}
	s := &Server{ns: ns, dir: o.Dir}
	if o.Cluster == nil {
		// ReadyForConnections is not "JetStream ready": wait for healthz, or the
		// first stream request may hang until the client's timeout.
		if err := s.WaitHealthy(ctx, o.ReadyTimeout); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// portFree turns "address already in use", which nats-server would only log,
// into an error a person can act on.
func portFree(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("embedded: cannot listen on %s: %v; stop what holds it or choose another --listen", addr, err)
	}
	return l.Close()
}

// WaitHealthy polls the server's own health check until it says ok.
func (s *Server) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st := s.ns.Healthz(&server.HealthzOptions{})
		if st.Status == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: JetStream on %s is not healthy after %s: %s", s.ns.Name(), timeout, st.Error)
		case <-tick.C:
		}
	}
}

// ClientURL is the nats:// address clients dial.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Name is the server's name.
func (s *Server) Name() string { return s.ns.Name() }

// Connect opens a client connection that does not touch the network.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect("", append([]nats.Option{nats.InProcessServer(s.ns)}, opts...)...)
}

// Kick drops one client's connection from the server's side, as an
// operator's kick or a lost link does: what it had sent and the server had
// not yet read is lost. The fault tests cut a controller mid-write with it.
func (s *Server) Kick(nc *nats.Conn) error {
	cid, err := nc.GetClientID()
	if err != nil {
		return err
	}
	return s.ns.DisconnectClientByID(cid)
}

// CutUsers drops every connection whose user (the name it connected
// with, which the auth callout held to its key) match accepts, and answers
// how many it dropped: the controller cuts a flooding node this way (issue
// 29). The connection may come back; refusing it is the callout's.
func (s *Server) CutUsers(match func(user string) bool) (int, error) {
	cz, err := s.ns.Connz(&server.ConnzOptions{Username: true, Limit: 1 << 20})
	if err != nil {
		return 0, fmt.Errorf("cannot list the bus's connections: %w", err)
	}
	n := 0
	for _, c := range cz.Conns {
		if match(c.AuthorizedUser) && s.ns.DisconnectClientByID(c.Cid) == nil {
			n++
		}
	}
	return n, nil
}

// Close shuts the server down and waits until it has released its data directory.
func (s *Server) Close() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
