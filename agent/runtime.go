package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/meshctl/mesh/agent/logbook"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Supervision is how the agent keeps a module's program running.
type Supervision struct {
	// RestartMin and RestartMax bound the wait before a program that
	// exited is started again: it doubles from the first to the second
	// while the program keeps exiting, and starts from the first again
	// once it ran a whole LoopWindow.
	RestartMin, RestartMax time.Duration
	// LoopExits exits within LoopWindow is a crash loop, reported once,
	// until the program runs a whole window again (reported steady).
	LoopExits  int
	LoopWindow time.Duration
	// Grace is how long a program asked to stop (SIGTERM to its process
	// group) has before it is killed.
	Grace time.Duration
}

func (s Supervision) withDefaults() Supervision {
	if s.RestartMin == 0 {
		s.RestartMin = time.Second
	}
	if s.RestartMax == 0 {
		s.RestartMax = time.Minute
	}
	if s.LoopExits == 0 {
		s.LoopExits = 5
	}
	if s.LoopWindow == 0 {
		s.LoopWindow = 2 * time.Minute
	}
	if s.Grace == 0 {
		s.Grace = 10 * time.Second
	}
	return s
}

// supervisor (rule 22) runs the programs of the modules of the declaration applied
// last, one goroutine each. It is told what to run after every apply, and
// reports what happens through report, never holding the agent's lock.
type supervisor struct {
	s      Supervision
	root   string
	node   string
	log    *slog.Logger
	report func(events.Event)
	// env is what module's program is given, and the file of its key
	// (identity.go), made readable by the user it runs as.
	env func(module string) ([]string, string, error)
	// book keeps each program's recent output, across its restarts.
	book *logbook.Book
	// busy, when set (a test), runs before each try again of a start
	// that found its program busy.
	busy func()

	mu    sync.Mutex
	procs map[string]*proc
}

// proc is one module's program under supervision.
type proc struct {
	spec compose.Runtime
	seq  uint64        // the declaration it runs under
	stop chan string   // a reason, sent once: stop and do not start again
	done chan struct{} // closed when supervision has ended
}

// reconcile makes the running programs those of runs: a program whose
// module left is stopped; one whose run changed, or a resource of whose
// module changed in the apply (changed), is restarted; a new one started.
// A module in hold (a resource of it failed) is left as it is.
func (v *supervisor) reconcile(runs []compose.Runtime, changed, hold map[string]bool, seq uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	want := map[string]compose.Runtime{}
	for _, r := range runs {
		if !hold[r.Module] {
			want[r.Module] = r
		}
	}
	for module, p := range v.procs {
		r, kept := want[module]
		switch {
		case hold[module]:
		case !kept:
			v.halt(module, p, "its module left the declaration")
		case !reflect.DeepEqual(r, p.spec):
			v.halt(module, p, "its run changed; starting it again")
		case changed[module]:
			v.halt(module, p, "a resource of its module changed; starting it again")
		}
	}
	for _, module := range slices.Sorted(maps.Keys(want)) {
		if _, running := v.procs[module]; !running {
			p := &proc{spec: want[module], seq: seq, stop: make(chan string, 1), done: make(chan struct{})}
			v.procs[module] = p
			go v.supervise(module, p)
		}
	}
	// The logs of modules that left go with them, those that left while
	// the agent was stopped included; a module held keeps its own.
	keep := map[string]bool{}
	for _, r := range runs {
		keep[r.Module] = true
	}
	v.book.KeepOnly(keep)
}

// halt stops one program and waits for it (the caller holds v.mu).
func (v *supervisor) halt(module string, p *proc, reason string) {
	p.stop <- reason
	<-p.done
	delete(v.procs, module)
}

// stopAll stops every program: the agent is stopping.
func (v *supervisor) stopAll() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for module, p := range v.procs {
		v.halt(module, p, "the agent stopped")
	}
}

// supervise starts the program, waits for it, and starts it again after
// each exit, until told to stop.
func (v *supervisor) supervise(module string, p *proc) {
	defer close(p.done)
	lg := v.book.Of(module)
	var exits []time.Time
	looping := false
	wait := v.s.RestartMin
	for {
		started := time.Now()
		// Its output, line by line, into its log: stderr's last line
		// also says why it ended.
		stdout, stderr := &lineWriter{log: lg, stream: wire.LogStdout}, &lineWriter{log: lg, stream: wire.LogStderr}
		cmd, err := v.start(p.spec, stdout, stderr)
		if err != nil {
			// A program that cannot start (not found, not executable,
			// no such user) says so where its output would be, in the
			// agent's log, and in the report.
			why := "cannot start: " + err.Error()
			lg.Add(wire.LogAgent, why)
			v.log.Warn("program cannot start", "module", module, "err", err)
			v.report(events.RuntimeExited{Node: v.node, Module: module, Code: -1, Reason: bound(why, maxReason)})
		} else {
			v.report(events.RuntimeStarted{Node: v.node, Module: module, PID: cmd.Process.Pid, Sequence: p.seq, Checked: p.spec.Health != nil,
				Digest: p.spec.Digest})
			v.log.Info("program started", "module", module, "pid", cmd.Process.Pid)
			stopCheck := v.startCheck(module, p.spec, started)
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			steady := time.NewTimer(v.s.LoopWindow)
			var werr error
			exited := false
			for !exited {
				select {
				case reason := <-p.stop:
					steady.Stop()
					stopCheck()
					v.terminate(cmd, waited)
					stdout.flush()
					stderr.flush()
					lg.Add(wire.LogAgent, "stopped: "+reason)
					v.report(events.RuntimeStopped{Node: v.node, Module: module, Reason: reason})
					return
				case <-steady.C:
					// A whole window without an exit: a loop is over, and
					// the next exit waits the least again.
					wait = v.s.RestartMin
					if looping {
						looping = false
						v.report(events.RuntimeSteady{Node: v.node, Module: module})
					}
				case werr = <-waited:
					steady.Stop()
					// Before the exit is said: the process's health is
					// never said after its end.
					stopCheck()
					exited = true
				}
			}
			stdout.flush()
			stderr.flush()
			ev := exitReport(v.node, module, cmd, werr)
			lg.Add(wire.LogAgent, ev.Detail())
			if last := stderr.lastLine(); last != "" && ev.Reason == "" {
				// Why it ended, in its own words: its last line of errors.
				ev.Reason = bound(ev.Detail()+": "+last, maxReason)
			}
			v.log.Warn("program exited", "module", module, "how", ev.Detail())
			v.report(ev)
			if time.Since(started) >= v.s.LoopWindow {
				wait = v.s.RestartMin
			}
		}
		now := time.Now()
		exits = append(exits, now)
		for len(exits) > 0 && now.Sub(exits[0]) > v.s.LoopWindow {
			exits = exits[1:]
		}
		if !looping && len(exits) >= v.s.LoopExits {
			looping = true
			v.report(events.RuntimeCrashLooping{Node: v.node, Module: module, Exits: len(exits), Seconds: int(v.s.LoopWindow.Seconds())})
		}
		timer := time.NewTimer(wait)
		select {
		case reason := <-p.stop:
			timer.Stop()
			v.report(events.RuntimeStopped{Node: v.node, Module: module, Reason: reason})
			return
		case <-timer.C:
		}
		wait = min(wait*2, v.s.RestartMax)
	}
}

// busyTries is how often a start that finds its program busy is tried
// (busyWait more before each next try: 10, 20, ... 70 ms, 280 ms in all).
const (
	busyTries = 8
	busyWait  = 10 * time.Millisecond
)

// start starts the program's process. A program file the agent has just
// written can be busy for a moment (ETXTBSY): another goroutine of the
// agent forked (another module's program, a health check) while the file
// was open for writing, and that child holds the write end until it execs
// (golang.org/issue/22315, which Go cannot prevent). So a busy start is
// tried again a few milliseconds later; without it a program's first start
// after an apply fails, one time in tens on a busy machine, and its node
// reports an exit its program never had.
func (v *supervisor) start(spec compose.Runtime, stdout, stderr io.Writer) (*exec.Cmd, error) {
	for try := 1; ; try++ {
		cmd, err := v.command(spec)
		if err == nil {
			cmd.Stdout, cmd.Stderr = stdout, stderr
			err = cmd.Start()
		}
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || try == busyTries {
			return cmd, err
		}
		if v.busy != nil {
			v.busy()
		}
		time.Sleep(time.Duration(try) * busyWait)
	}
}

// startCheck runs the program's health check, if its run has one, for
// the process started at started; the function it answers stops it and
// returns once it can report nothing more.
func (v *supervisor) startCheck(module string, spec compose.Runtime, started time.Time) func() {
	if spec.Health == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.checkHealth(ctx, module, spec, started) }()
	return func() { cancel(); <-done }
}

// command builds the program's process: its own process group (so a stop
// reaches whatever it started), killed if the agent dies without stopping
// it, in its directory under the root, with the agent's PATH, the MESH_
// variables and its own env.
func (v *supervisor) command(r compose.Runtime) (*exec.Cmd, error) {
	cmd := exec.Command(program(v.root, r), r.Args...)
	cmd.Dir = v.root
	if r.Dir != "" && r.Dir != "/" {
		cmd.Dir = filepath.Join(v.root, filepath.FromSlash(r.Dir))
	}
	env, keyFile, err := v.env(r.Module)
	if err != nil {
		return nil, err
	}
	cmd.Env = env
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		cmd.Env = append(cmd.Env, k+"="+r.Env[k])
	}
	// Its output is read through pipes (supervise gives the writers): a
	// child it leaves behind holding them would keep Wait from returning
	// after the program itself exited, and the exit unnoticed; a second
	// after the exit the pipes are closed on it.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r.User != "" {
		cred, err := credential(r.User)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
		if keyFile != "" {
			if err := os.Chown(keyFile, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("cannot give its key to user %s: %w", r.User, err)
			}
		}
	}
	return cmd, nil
}

func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("no user %s on this machine", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s has ids %s:%s, which are not numbers", name, u.Uid, u.Gid)
	}
	if os.Geteuid() != 0 && uint64(os.Geteuid()) != uid {
		return nil, fmt.Errorf("running as user %s needs an agent running as root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// terminate asks the program's process group to stop, and kills it after
// the grace period.
func (v *supervisor) terminate(cmd *exec.Cmd, waited chan error) {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-waited:
	case <-time.After(v.s.Grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
	}
	// What it started and left behind goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// exitReport says how a program ended.
func exitReport(node, module string, cmd *exec.Cmd, err error) events.RuntimeExited {
	ev := events.RuntimeExited{Node: node, Module: module}
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited well; only a child of it held its output open.
		err = nil
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		ev.Code, ev.Reason = -1, bound(err.Error(), maxReason)
		return ev
	}
	state := cmd.ProcessState
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ev.Code, ev.Signal = -1, ws.Signal().String()
		return ev
	}
	ev.Code = state.ExitCode()
	return ev
}

// lineWriter cuts one stream of a program into lines for its log:
// exec copies the stream into it from a goroutine of its own, and the
// supervisor flushes the unfinished last line once the program ended.
type lineWriter struct {
	log    *logbook.Log
	stream wire.LogStream

	mu   sync.Mutex
	part []byte // a line begun and not ended
	last string // the last line that is not blank
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.part = append(w.part, p...)
			break
		}
		w.part = append(w.part, p[:i]...)
		p = p[i+1:]
		w.ended()
	}
	// A line longer than a log keeps whole is kept in pieces as it comes,
	// never held back without end. (Only longer: a line of exactly the
	// most waits for its newline, or it would end in an empty line.)
	for len(w.part) > wire.MaxLogLine {
		w.piece(wire.MaxLogLine)
	}
	return n, nil
}

// flush keeps the unfinished last line, if any.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.part) > 0 {
		w.ended()
	}
}

// ended keeps the line in part, which ended: in pieces if it is too long.
func (w *lineWriter) ended() {
	for len(w.part) > wire.MaxLogLine {
		w.piece(wire.MaxLogLine)
	}
	w.piece(len(w.part))
}

// piece keeps the first n bytes of part as a line (cut back to a rune's
// start, so a character is never split), and leaves the rest in part.
func (w *lineWriter) piece(n int) {
	cut := n
	for cut < len(w.part) && cut > 0 && !utf8.RuneStart(w.part[cut]) {
		cut--
	}
	if cut == 0 {
		cut = n // no rune starts in it: not text, cut where asked
	}
	line := strings.TrimSuffix(string(w.part[:cut]), "\r")
	w.part = append(w.part[:0], w.part[cut:]...)
	w.log.Add(w.stream, line)
	if t := strings.TrimSpace(line); t != "" {
		w.last = t
	}
}

// lastLine is the last line the stream wrote that is not blank.
func (w *lineWriter) lastLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
