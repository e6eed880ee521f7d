package embeddedtest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/mesh/embedded"
	"github.com/nats-io/nats.go"
)

// Cutter stands between clients and a bus, so that a test can take the bus
// away from them as a network or a killed process does, at the moment it
// chooses. An embedded server's Shutdown is polite: it answers what it took
// and flushes before it closes, so a read in flight is seldom lost, where a
// killed process loses every one; and no real drop can be timed to fall
// between a request and its answer, nor held until the test has seen what
// went by meanwhile.
type Cutter struct {
	ln     net.Listener
	target string
	deaf   atomic.Bool
	mu     sync.Mutex
	away   bool
	conns  []net.Conn
}

// NewCutter listens on addr ("127.0.0.1:0" picks a port) and forwards each
// connection to target (host:port); it stops when the test ends.
func NewCutter(t testing.TB, addr, target string) *Cutter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cutter{ln: ln, target: target}
	go c.serve()
	t.Cleanup(c.Close)
	return c
}

// Addr is where the clients connect.
func (c *Cutter) Addr() string { return c.ln.Addr().String() }

// URL is Addr as a NATS URL.
func (c *Cutter) URL() string { return "nats://" + c.Addr() }

func (c *Cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		away := c.away
		c.mu.Unlock()
		if away {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go pipe(out, in, nil)
		go pipe(in, out, &c.deaf)
	}
}

// pipe copies from src to dst until either fails; while deaf holds, what
// src sends is read and dropped.
func pipe(dst, src net.Conn, deaf *atomic.Bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && (deaf == nil || !deaf.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Deafen drops everything the bus sends from now on.
func (c *Cutter) Deafen() { c.deaf.Store(true) }

// Drop resets every connection through it (no flush, no goodbye) and
// refuses every new one until Resume.
func (c *Cutter) Drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.away = true
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as the kernel sends for a killed process
		}
		conn.Close()
	}
	c.conns = nil
}

// Resume takes connections again after Drop.
func (c *Cutter) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.away = false
}

// Close stops listening and resets every connection through it.
func (c *Cutter) Close() {
	c.ln.Close()
	c.Drop()
}

// ConnCut is a connection to s through a Cutter of its own, which
// reconnects without end every 10 ms, as a controller or agent keeps
// trying its bus; both go when the test ends.
func ConnCut(t testing.TB, s *embedded.Server) (*nats.Conn, *Cutter) {
	t.Helper()
	cut := NewCutter(t, "127.0.0.1:0", strings.TrimPrefix(s.ClientURL(), "nats://"))
	nc, err := nats.Connect(cut.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, cut
}
