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
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// sockets measures the socket floor (bench.Sockets) with n agents, their
// answers spread over span: a bus in this process, the agents and the hub
// each in a process of their own (mesh bench --sockets-agents and
// --sockets-hub), driven on their stdin; the bus's CPU is this process's
// over a round above its rate at rest (the agents beat, as the mesh's do),
// the hub's its own. Each figure is its median round, as bench.Floor's.
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
	// The agents first, then the hub: each a process of its own, driven
	// line by line on its stdin.
	var kids [2]*benchChild
	var ins [2]io.WriteCloser
	for i, role := range []string{"agents", "hub"} {
		c := &benchChild{name: "sockets' " + role, log: filepath.Join(dir, role+".log"), exited: make(chan struct{}), lines: make(chan string, 64)}
		c.cmd = r.command(ctx, home, url, "bench", "--sockets-"+role, fmt.Sprint(n))
		if ins[i], err = c.cmd.StdinPipe(); err != nil {
			return best, err
		}
		if err := r.start(c); err != nil {
			return best, err
		}
		kids[i] = c
		defer func() { ins[i].Close(); c.stop() }()
		if err := c.await(ctx, "ready"); err != nil {
			return best, err
		}
	}
	hub := kids[1]
	say := func(i int, line, want string) error {
		if _, err := io.WriteString(ins[i], line+"\n"); err != nil {
			return kids[i].gone()
		}
		return kids[i].await(ctx, want)
	}
	// Each round's bus and hub figures: own, burst, shared.
	var figures [6][]time.Duration
	for range rounds {
		var bus, hubs [3]time.Duration
		for k, kind := range []struct {
			name   string
			spread time.Duration
		}{{"own", span}, {"own", 0}, {"shared", 0}} {
			if err := say(0, "spread "+kind.spread.String(), "ok"); err != nil {
				return best, err
			}
			// At rest for a period of the agents' beats first (or --idle,
			// when shorter): a round's CPU is what it spends above that
			// rate, as a push's is.
			t0, rest, err := usages([]int{0, hub.pid()})
			if err != nil {
				return best, err
			}
			select {
			case <-time.After(min(r.idle, events.LiveEvery)):
			case <-ctx.Done():
				return best, ctx.Err()
			}
			t1, before, err := usages([]int{0, hub.pid()})
			if err != nil {
				return best, err
			}
			if err := say(1, kind.name, "done"); err != nil {
				return best, err
			}
			t2, after, err := usages([]int{0, hub.pid()})
			if err != nil {
				return best, err
			}
			above := func(j int) time.Duration {
				atRest := time.Duration(float64(before[j].CPU-rest[j].CPU) / float64(t1.Sub(t0)) * float64(t2.Sub(t1)))
				return max(after[j].CPU-before[j].CPU-atRest, 0) / time.Duration(n)
			}
			bus[k], hubs[k] = above(0), above(1)
		}
		for k := range 3 {
			figures[k], figures[3+k] = append(figures[k], bus[k]), append(figures[3+k], hubs[k])
		}
	}
	m := func(k int) time.Duration { return bench.Median(figures[k]) }
	best.Own, best.Burst, best.Shared = m(0), m(1), m(2)
	best.HubOwn, best.HubBurst, best.HubShared = m(3), m(4), m(5)
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
