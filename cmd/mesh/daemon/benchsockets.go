package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshctl/mesh/bench"
	"github.com/meshctl/mesh/embedded"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// sockets measures the socket floor (bench.Sockets) with n agents, their
// answers spread over span: a bus in this process, the agents and the hub
// in a process of their own (mesh bench --sockets-client), each round told
// to it on its stdin; the bus's CPU is this process's over the round. The
// least of rounds rounds.
func (r benchRun) sockets(ctx context.Context, dir string, n, rounds int, span time.Duration) (bench.Sockets, error) {
	best := bench.Sockets{Span: span}
	srv, err := embedded.Start(ctx, embedded.Options{Dir: filepath.Join(dir, "bus"), Port: -1})
	if err != nil {
		return best, err
	}
	defer srv.Close()
	url := srv.ClientURL()
	nc, err := nats.Connect(url, nats.Name("mesh bench"))
	if err != nil {
		return best, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.CreateStream(ctx, bench.SocketStreamConfig())
	}
	nc.Close()
	if err != nil {
		return best, fmt.Errorf("bench: cannot create the sockets' stream: %w", err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return best, err
	}
	c := &benchChild{name: "sockets", log: filepath.Join(dir, "sockets.log"), exited: make(chan struct{}), lines: make(chan string, 64)}
	c.cmd = r.command(ctx, home, url, "bench", "--sockets-client", fmt.Sprint(n))
	in, err := c.cmd.StdinPipe()
	if err != nil {
		return best, err
	}
	if err := r.start(c); err != nil {
		return best, err
	}
	defer func() { in.Close(); c.stop() }()
	if err := c.await(ctx, "ready"); err != nil {
		return best, err
	}
	for i := range rounds {
		var got [3]time.Duration
		for k, kind := range []string{"own " + span.String(), "own 0s", "shared 0s"} {
			before, err := bench.Self()
			if err != nil {
				return best, err
			}
			if _, err := io.WriteString(in, kind+"\n"); err != nil {
				return best, c.gone()
			}
			if err := c.await(ctx, "done"); err != nil {
				return best, err
			}
			after, err := bench.Self()
			if err != nil {
				return best, err
			}
			got[k] = (after.CPU - before.CPU) / time.Duration(n)
		}
		if i == 0 {
			best.Own, best.Burst, best.Shared = got[0], got[1], got[2]
		}
		best.Own, best.Burst, best.Shared = min(best.Own, got[0]), min(best.Burst, got[1]), min(best.Shared, got[2])
	}
	return best, nil
}

// await reads the child's lines until one is want.
func (c *benchChild) await(ctx context.Context, want string) error {
	deadline := time.After(benchWait)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				<-c.exited
				return c.gone()
			}
			if line == want {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("the %s did not say %q within %s: this machine is too busy to measure on now; %s", c.name, want, benchWait, c.lastWords())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
