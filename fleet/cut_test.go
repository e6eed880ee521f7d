package fleet

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// cutter stands between the agents and the bus on a fixed port, so that a
// test can take the bus away as kill -9 does. An embedded server's Shutdown
// is polite: it answers what it took and flushes before it closes, so a
// read in flight is seldom lost, where a killed process loses every one.
// deafen drops every byte from the bus from that moment; cut then resets
// every connection (no flush, no goodbye).
type cutter struct {
	ln     net.Listener
	target string
	deaf   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

// newCutter listens on addr ("127.0.0.1:0" picks a port) and forwards each
// connection to target.
func newCutter(t *testing.T, addr, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go c.serve()
	return c
}

// Addr is where the agents connect.
func (c *cutter) Addr() string { return c.ln.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
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

// deafen drops everything the bus sends from now on.
func (c *cutter) deafen() { c.deaf.Store(true) }

// cut stops listening and resets every connection through it.
func (c *cutter) cut() {
	c.ln.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as the kernel sends for a killed process
		}
		conn.Close()
	}
	c.conns = nil
}
