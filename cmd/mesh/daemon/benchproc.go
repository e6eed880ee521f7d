package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/mesh/bench"
	"github.com/meshctl/mesh/wire"
)

// benchChild is a process mesh bench started: the controller or a fleet.
type benchChild struct {
	name   string
	cmd    *exec.Cmd
	log    string        // its stderr, kept in the run's directory
	exited chan struct{} // closed once it has exited
	lines  chan string   // its stdout, line by line (closed when it ends)
}

// command is this binary with the home and bus of a phase, and an
// environment naming no other bus (MESH_NATS_URL beside --bus that
// disagreed would be refused). The rest of the environment is passed on:
// a test's binary is mesh by it (MESH_TEST_MAIN).
func (r benchRun) command(ctx context.Context, home, url string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"--home", home, "--bus", url}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MESH_NATS_URL=") && !strings.HasPrefix(kv, "NATS_URL=") && !strings.HasPrefix(kv, "MESH_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Stopped as an operator stops it, so it ends its connections and
	// its home's lock itself; killed only if it does not.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

func (r benchRun) spawn(ctx context.Context, dir, home, url, name string, env []string, args ...string) (*benchChild, error) {
	c := &benchChild{name: name, log: filepath.Join(dir, name+".log"), exited: make(chan struct{}), lines: make(chan string, 64)}
	c.cmd = r.command(ctx, home, url, args...)
	c.cmd.Env = append(c.cmd.Env, env...)
	if err := r.start(c); err != nil {
		return nil, err
	}
	return c, nil
}

// start starts c's command, its stderr to its log and its stdout to its
// lines.
func (r benchRun) start(c *benchChild) error {
	logf, err := os.Create(c.log)
	if err != nil {
		return err
	}
	c.cmd.Stderr = logf
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cannot start the %s (%s): %w", c.name, r.bin, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.cmd.Wait()
		logf.Close()
		close(c.exited)
	}()
	return nil
}

func (c *benchChild) pid() int { return c.cmd.Process.Pid }

// stop ends the process as Ctrl-C would, and waits for it.
func (c *benchChild) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for range c.lines { // drained, or the process blocks writing
		}
	}()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
}

// gone is the error of a process that ended before it should have,
// with the last line it logged.
func (c *benchChild) gone() error {
	return fmt.Errorf("the %s exited (%v); %s", c.name, c.cmd.ProcessState, c.lastWords())
}

// lastWords is the last line the process logged: its log is removed with
// a temporary directory.
func (c *benchChild) lastWords() string {
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "its last words: " + lines[len(lines)-1]
}

// startReady starts the controller and returns once it says it is ready,
// by the protocol a systemd unit of Type=notify hears (notifyReady).
func (r benchRun) startReady(ctx context.Context, dir, home, url string, args ...string) (*benchChild, error) {
	sock := "@mesh-bench-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the controller's readiness: %w", err)
	}
	defer conn.Close()
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if bytes.Contains(buf[:n], []byte("READY=1")) {
				close(ready)
				return
			}
		}
	}()
	c, err := r.spawn(ctx, dir, home, url, "controller", []string{"NOTIFY_SOCKET=" + sock}, args...)
	if err != nil {
		return nil, err
	}
	select {
	case <-ready:
		return c, nil
	case <-c.exited:
		return nil, c.gone()
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

// The lines of mesh fleet mesh bench reads (FleetCmd.Run, watchRounds).
var (
	fleetFollows = regexp.MustCompile(`^\d+ (simulated )?agent\(s\) (connected and following|recorded their report keys and are listening) in `)
	fleetRound   = regexp.MustCompile(`^(\d+) report\(s\) in (\S+) from the first to the last: (\d+) applied, (\d+) failed, (\d+) refused$`)
)

// startFleet starts mesh fleet (enrolling and assigning its nodes itself)
// and returns once every agent follows, saying its progress on stderr.
// Each step it says (its nodes enrolled, assigned, the agents' tokens made,
// the agents following) has benchWait of its own: real agents enrolling
// the keys they make took a minute at 10,000 beside the rest, which one
// wait for the whole start left little room for on a busy box.
func (r benchRun) startFleet(ctx context.Context, dir, home, url, name string, args ...string) (*benchChild, error) {
	f, err := r.spawn(ctx, dir, home, url, "fleet", nil, args...)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(benchWait)
	defer deadline.Stop()
	for {
		select {
		case <-deadline.C:
			f.stop()
			return nil, fmt.Errorf("the fleet's agents did not all follow within %s of its last step: this machine is too busy to measure on now; %s", benchWait, f.lastWords())
		case line, ok := <-f.lines:
			if !ok {
				<-f.exited
				return nil, f.gone()
			}
			fmt.Fprintf(r.out.Err, "%s: %s\n", name, line)
			if fleetFollows.MatchString(line) {
				return f, nil
			}
			deadline.Reset(benchWait)
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		}
	}
}

// awaitReports reads the fleet's rounds until n reports came, every one
// an application, and says how long they took from the first to the last
// (a round's span each, when the fleet went quiet between them).
func (f *benchChild) awaitReports(ctx context.Context, n int) (time.Duration, error) {
	applied := 0
	var span time.Duration
	deadline := time.After(benchWait)
	for applied < n {
		select {
		case <-deadline:
			return span, fmt.Errorf("%d of %d node(s) reported within %s: this machine is too busy to measure on now; %s", applied, n, benchWait, f.lastWords())
		case line, ok := <-f.lines:
			if !ok {
				<-f.exited
				return span, f.gone()
			}
			m := fleetRound.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			d, _ := time.ParseDuration(m[2])
			span += d
			a, _ := strconv.Atoi(m[3])
			failed, _ := strconv.Atoi(m[4])
			refused, _ := strconv.Atoi(m[5])
			if failed+refused > 0 {
				return span, fmt.Errorf("the fleet reported %d failed and %d refused: a bench measures a push every node applies; %s", failed, refused, f.lastWords())
			}
			applied += a
		case <-ctx.Done():
			return span, ctx.Err()
		}
	}
	return span, nil
}

// pushFigures are one push as the processes counted it (the controller,
// the bus, the fleet, in that order).
type pushFigures struct {
	sent   int
	span   time.Duration // the reports' span, the first to the last
	cpu    [3]time.Duration
	faults [3]int64 // pages faulted in over the push (Usage.Faults)
	idle   [3]float64
	last   [3]bench.Usage
}

// said is the push's CPU above idle and pages faulted in, process by
// process, as a progress line says them.
func (p pushFigures) said() string {
	return fmt.Sprintf("CPU above idle: controller %.2f s, bus %.2f s, fleet %.2f s; pages faulted in: %d, %d, %d",
		p.cpu[0].Seconds(), p.cpu[1].Seconds(), p.cpu[2].Seconds(), p.faults[0], p.faults[1], p.faults[2])
}

// measuredPush measures each process at rest for r.idle, then pushes
// to every one of the fleet's nodes as an operator does (mesh push, a process of its own that
// no row counts) and waits for every report: the CPU of each process over
// the push, less what it spends at rest over as long.
func (r benchRun) measuredPush(ctx context.Context, home, url string, f *benchChild, pids []int, nodes int) (pushFigures, error) {
	var p pushFigures
	t0, u0, err := usages(pids)
	if err != nil {
		return p, err
	}
	select {
	case <-time.After(r.idle):
	case <-ctx.Done():
		return p, ctx.Err()
	}
	t1, u1, err := usages(pids)
	if err != nil {
		return p, err
	}
	var stderr bytes.Buffer
	cmd := r.command(ctx, home, url, "push", "--json")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// mesh push exits non-zero when it left any node unsent.
		return p, fmt.Errorf("mesh push: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	// Every node of the fleet is sent to, and its reply is read only
	// once the push is measured: the bus runs in this process, and
	// decoding a reply naming ten thousand nodes here was the harness's
	// CPU counted as the bus's, some 3% of the bus row (issue 34).
	if p.span, err = f.awaitReports(ctx, nodes); err != nil {
		return p, err
	}
	t2, u2, err := usages(pids)
	if err != nil {
		return p, err
	}
	var reply wire.PushReply
	if err := json.Unmarshal(out, &reply); err != nil {
		return p, fmt.Errorf("mesh push --json printed what is not its reply: %w", err)
	}
	if len(reply.Unsent) > 0 || len(reply.Sent) != nodes {
		return p, fmt.Errorf("the push sent %d of %d node(s) and left %d unsent", len(reply.Sent), nodes, len(reply.Unsent))
	}
	p.sent = nodes
	for j := range pids {
		p.idle[j] = (u1[j].CPU - u0[j].CPU).Seconds() / t1.Sub(t0).Seconds()
		atRest := time.Duration(p.idle[j] * float64(t2.Sub(t1)))
		p.cpu[j] = max(u2[j].CPU-u1[j].CPU-atRest, 0)
		p.faults[j] = u2[j].Faults - u1[j].Faults
		p.last[j] = u2[j]
	}
	return p, nil
}

// usages reads each process's usage now; pid 0 is this one.
func usages(pids []int) (time.Time, []bench.Usage, error) {
	out := make([]bench.Usage, len(pids))
	for i, pid := range pids {
		var err error
		if pid == 0 {
			out[i], err = bench.Self()
		} else {
			out[i], err = bench.Of(pid)
		}
		if err != nil {
			return time.Time{}, nil, err
		}
	}
	return time.Now(), out, nil
}
