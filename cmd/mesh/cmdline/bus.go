package cmdline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

// DefaultBus is where a client looks when nothing names the bus: where mesh
// up listens by default.
const DefaultBus = "nats://127.0.0.1:4222"

// BusAddr is a bus URL and what said so, for messages that name both.
type BusAddr struct {
	URL, From string
}

func (b BusAddr) String() string { return fmt.Sprintf("%s (from %s)", b.URL, b.From) }

// ResolveBus decides which bus a command uses. --bus and MESH_NATS_URL that
// disagree are refused rather than one silently winning: an operator who
// exported one and typed the other cannot know which mesh they just changed.
// NATS_URL, the nats CLI's, names the bus when neither does (before the
// bus mesh up recorded): an operator who pointed nats at a bus means that
// one, and every error names where the bus came from.
func (g *Globals) ResolveBus(required bool) (BusAddr, error) {
	env := os.Getenv("MESH_NATS_URL")
	natsEnv := os.Getenv("NATS_URL")
	switch {
	case g.Bus != "" && env != "" && NormalizeURL(g.Bus) != NormalizeURL(env):
		return BusAddr{}, Usagef("the bus is configured two ways: --bus says %s and MESH_NATS_URL says %s; give one, or make them agree", g.Bus, env)
	case g.Bus != "":
		return BusAddr{URL: g.Bus, From: "--bus"}, nil
	case env != "":
		return BusAddr{URL: env, From: "MESH_NATS_URL"}, nil
	case natsEnv != "":
		return BusAddr{URL: natsEnv, From: "NATS_URL"}, nil
	case required:
		return BusAddr{}, Usagef("no bus named: give --bus URL or set MESH_NATS_URL or NATS_URL (mesh up runs its own)")
	}
	if rec, err := ReadBusRecord(g.Home); err == nil {
		return BusAddr{URL: rec.URL, From: fmt.Sprintf("%s, where mesh up recorded it", BusRecordPath(g.Home))}, nil
	}
	return BusAddr{URL: DefaultBus, From: fmt.Sprintf("the default: no mesh up has recorded a bus in %s", g.Home)}, nil
}

func NormalizeURL(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	return strings.TrimSuffix(s, "/")
}

// ConnectTimeout bounds a dial and its handshake, which on a closed bus
// waits for the controller's callout. The tests raise it (TestMain): on a
// starved 2-core box two seconds were not always enough, and a command
// then said the bus could not be reached.
var ConnectTimeout = 2 * time.Second

// AgentConnectTimeout bounds the handshake of the programs that stay
// connected (mesh agent, mesh fleet's agents): the embedded bus waits this
// long for the controller's callout (embedded.AuthTimeout), and an agent
// that gave up sooner on a loaded controller said the node was refused
// (one of 500 fleet agents, in a CI run on a box shared with four others).
const AgentConnectTimeout = 10 * time.Second

// Connect dials the bus, failing fast with a sentence naming where it tried.
func Connect(addr BusAddr, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.Timeout(ConnectTimeout)}, opts...)
	nc, err := nats.Connect(addr.URL, opts...)
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("cannot connect to the bus at %s: %w", addr, err)
	}
	var slow net.Error
	if errors.Is(err, nats.ErrTimeout) || errors.As(err, &slow) && slow.Timeout() {
		// Reached, but not let in in time: on a closed bus the controller
		// decides each connection (the bus waits embedded.AuthTimeout for
		// it), so a silent controller looks like this, not like no bus.
		return nil, fmt.Errorf("the bus at %s did not let this connection in in time: %w; on a closed bus the controller decides each connection, so it may be starting, busy or stopped (mesh up says ready once it answers)", addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach the bus at %s: %w; start one with `mesh up`, or point --bus or MESH_NATS_URL at a running one", addr, err)
	}
	return nc, nil
}

// Dial connects as an operator: with the key --creds names (an operator's
// key file, issue 33), or else the one mesh up keeps in the home, when
// there is one (a closed bus refuses anyone else).
func (g *Globals) Dial(addr BusAddr, name string, opts ...nats.Option) (*nats.Conn, error) {
	operator, err := g.operatorOptions()
	if err != nil {
		return nil, err
	}
	secure, err := g.TLSOptions()
	if err != nil {
		return nil, err
	}
	operator = append(operator, secure...)
	nc, err := Connect(addr, name, append(operator, opts...)...)
	if errors.Is(err, nats.ErrAuthorization) && len(operator) == 0 {
		return nil, fmt.Errorf("the bus at %s refused this command: it lets in only its nodes and its operator, and the home %s holds no operator key (%s); give the --home of the mesh up that runs it",
			addr, g.Home, busauth.OperatorKeyFile)
	}
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("the bus at %s refused the operator key %s: that operator was removed (an admin sees who is in with mesh operator list), the key is another mesh's, or its controller is not answering yet (wait for ready)",
			addr, g.keyPath())
	}
	return nc, err
}

// keyPath is the operator key a command connects with.
func (g *Globals) keyPath() string {
	if g.credsIsKey() {
		return g.Creds
	}
	return filepath.Join(g.Home, busauth.OperatorKeyFile)
}

// credsIsKey says whether --creds names an operator's key file (an nkeys
// seed, as mesh operator add writes) rather than a NATS credentials file.
func (g *Globals) credsIsKey() bool {
	if g.Creds == "" {
		return false
	}
	b, err := os.ReadFile(g.Creds)
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "SU")
}

// operatorOptions connect with --creds's key, or the home's.
func (g *Globals) operatorOptions() ([]nats.Option, error) {
	if !g.credsIsKey() {
		return busauth.OperatorOptions(g.Home)
	}
	kp, err := busauth.ReadOperatorKey(g.Creds)
	if err != nil {
		return nil, Usagef("--creds: %v", err)
	}
	return busauth.KeyOptions(kp), nil
}

// HomeCA is where mesh up --tls keeps the bus's CA in a home.
func HomeCA(home string) string { return filepath.Join(home, "tls", embedded.CAFile) }

// TLSOptions are the connection options of --tls-ca, --tls-cert,
// --tls-key and --creds; with no --tls-ca, the CA mesh up --tls keeps in
// the home, when there is one.
func (g *Globals) TLSOptions() ([]nats.Option, error) {
	var opts []nats.Option
	ca := g.TLSCA
	if ca == "" {
		if _, err := os.Stat(HomeCA(g.Home)); err == nil {
			ca = HomeCA(g.Home)
		}
	}
	if ca != "" {
		if _, err := os.Stat(ca); err != nil {
			return nil, Usagef("--tls-ca %s cannot be read: %v", ca, err)
		}
		opts = append(opts, nats.RootCAs(ca))
	}
	switch {
	case (g.TLSCert == "") != (g.TLSKey == ""):
		return nil, Usagef("--tls-cert and --tls-key go together: give both, or neither")
	case g.TLSCert != "":
		opts = append(opts, nats.ClientCert(g.TLSCert, g.TLSKey))
	}
	if g.Creds != "" && !g.credsIsKey() {
		if _, err := os.Stat(g.Creds); err != nil {
			return nil, Usagef("--creds %s cannot be read: %v", g.Creds, err)
		}
		opts = append(opts, nats.UserCredentials(g.Creds))
	}
	return opts, nil
}

// Client connects to the bus and returns a verb client; close releases it.
func (g *Globals) Client() (*client.Client, func(), error) {
	addr, err := g.ResolveBus(false)
	if err != nil {
		return nil, nil, err
	}
	denials := client.NewDenials()
	nc, err := g.Dial(addr, "mesh cli", append(client.Options(), denials.Option())...)
	if err != nil {
		return nil, nil, err
	}
	return &client.Client{NC: nc, Where: addr.String(), Timeout: g.TimeoutOr(client.DefaultTimeout), Denials: denials}, nc.Close, nil
}

// Call runs one verb against the controller.
func (g *Globals) Call(ctx context.Context, subject string, req, resp any) error {
	c, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	return c.Call(ctx, subject, req, resp)
}

// BusRecord is what mesh up writes in its home so that other commands given
// the same home find its bus.
type BusRecord struct {
	URL       string    `json:"url"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
}

func BusRecordPath(home string) string { return filepath.Join(home, "bus.json") }

func ReadBusRecord(home string) (BusRecord, error) {
	var r BusRecord
	b, err := os.ReadFile(BusRecordPath(home))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil || r.URL == "" {
		return r, fmt.Errorf("%s is not a bus record", BusRecordPath(home))
	}
	return r, nil
}

func WriteBusRecord(home, u string) error {
	b, _ := json.Marshal(BusRecord{URL: u, PID: os.Getpid(), StartedAt: time.Now().UTC()})
	tmp := BusRecordPath(home) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("cannot record the bus in %s: %w", home, err)
	}
	return os.Rename(tmp, BusRecordPath(home))
}

// LockHome takes the home for this process. The kernel drops the lock when
// the process dies, so a kill -9 never leaves a home locked.
func LockHome(home, what string) (func(), error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the home %s: %w", home, err)
	}
	f, err := os.OpenFile(filepath.Join(home, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock of the home %s: %w", home, err)
	}
	if err := flockSoon(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			held := "another mesh process"
			if rec, err := ReadBusRecord(home); err == nil {
				held = fmt.Sprintf("mesh (pid %d, bus %s)", rec.PID, rec.URL)
			}
			return nil, fmt.Errorf("the home %s is already in use by %s; stop that one first, or give %s another --home", home, held, what)
		}
		return nil, fmt.Errorf("cannot lock the home %s: %w", home, err)
	}
	return func() { f.Close() }, nil
}

// lockWait is how long a start waits for the home's lock before saying who
// holds it. The kernel releases a dead holder's lock only once its exit is
// done: `kill -9` of a controller holding gigabytes, then `mesh up` at
// once, met the lock still held for a moment (issue 28), and an operator
// restarting a killed mesh must not be told it is in use.
const lockWait = 1500 * time.Millisecond

// flockSoon takes f's exclusive lock, trying again until lockWait passes.
func flockSoon(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(25 * time.Millisecond) // polling a lock: flock has no timed wait
	}
}

// SplitListen turns --listen host:port into its parts.
func SplitListen(s string) (string, int, error) {
	u, err := url.Parse("nats://" + s)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return "", 0, Usagef("--listen %q is not host:port (for example 127.0.0.1:4222)", s)
	}
	var port int
	if _, err := fmt.Sscan(u.Port(), &port); err != nil || port < 1 || port > 65535 {
		return "", 0, Usagef("--listen %q has no valid port (1 to 65535)", s)
	}
	return u.Hostname(), port, nil
}

// BusNamed reports whether the command was told a bus (--bus or
// MESH_NATS_URL), rather than left to find the one mesh up recorded.
func (g *Globals) BusNamed() bool {
	return g.Bus != "" || os.Getenv("MESH_NATS_URL") != "" || os.Getenv("NATS_URL") != ""
}

// Log connects to the bus as the commands that read or write the log
// itself do (mesh events, backup, traffic), not through a controller, and
// attaches to its stream. required is ResolveBus's. close ends the
// connection.
func (g *Globals) Log(ctx context.Context, required bool, name string) (st *store.Store, close func(), err error) {
	addr, err := g.ResolveBus(required)
	if err != nil {
		return nil, nil, err
	}
	nc, err := g.Dial(addr, name)
	if err != nil {
		return nil, nil, err
	}
	if st, err = store.Attach(ctx, nc, ""); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return st, nc.Close, nil
}
