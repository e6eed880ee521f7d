package embeddedtest

import (
	"errors"
	"net"
	"os"
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
	// held stops what the bus sends at the cutter, unread, until Drop;
	// freed wakes the pipes it stopped; bus are the connections to the
	// bus, whose reads Hold interrupts.
	held  bool
	freed *sync.Cond
	bus   []net.Conn
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
	c.freed = sync.NewCond(&c.mu)
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
		c.conns, c.bus = append(c.conns, in, out), append(c.bus, out)
		c.mu.Unlock()
		go c.pipe(out, in, false)
		go c.pipe(in, out, true)
	}
}

// pipe copies from src to dst until either fails. What the bus sends
// (fromBus) is read and dropped while deaf holds, and waits at the cutter
// while held does.
func (c *Cutter) pipe(dst, src net.Conn, fromBus bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		if fromBus {
			// The deadline is cleared under the lock Hold sets it under:
			// a Hold after this point interrupts the read below.
			c.mu.Lock()
			for c.held {
				c.freed.Wait()
			}
			src.SetReadDeadline(time.Time{})
			c.mu.Unlock()
		}
		n, err := src.Read(buf)
		if n > 0 && (!fromBus || !c.deaf.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if fromBus && errors.Is(err, os.ErrDeadlineExceeded) {
			continue // Hold interrupted the read: wait above
		}
		if err != nil {
			return
		}
	}
}

// Deafen drops everything the bus sends from now on.
func (c *Cutter) Deafen() { c.deaf.Store(true) }

// Hold keeps what the bus sends from its clients until the next Drop,
// which loses it: a client's requests reach the bus and are carried out,
// and none of their answers come back. What a killed link loses is then
// whatever the test let go by before Hold, no matter how fast either side
// runs. A read from the bus in progress is interrupted (a deadline now),
// or the next chunk the bus sent, up to a buffer's worth, would still go
// through.
func (c *Cutter) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
	for _, conn := range c.bus {
		conn.SetReadDeadline(time.Now())
	}
}

// Drop resets every connection through it (no flush, no goodbye) and
// refuses every new one until Resume.
func (c *Cutter) Drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.away = true
	c.held = false
	c.freed.Broadcast()
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as the kernel sends for a killed process
		}
		conn.Close()
	}
	c.conns, c.bus = nil, nil
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
