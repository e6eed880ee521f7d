package logbook

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/wire"
)

// DefaultBytes is how much of each program's newest output the agent
// keeps when its Config.LogBytes is 0: a screenful of a chatty program's last
// minutes, a day of a quiet one's.
const DefaultBytes = 256 << 10

// MinBytes is the least the agent's Config.LogBytes may be: a few of the longest
// lines (wire.MaxLogLine), so that the newest line is always kept whole.
const MinBytes = 16 << 10

// Book keeps the recent output of each module's program on the node
// (issue 31 point 8): stdout and stderr line by line, in the order the
// agent read them, each with its time and stream, and the agent's own word
// on the program (a failed start, an exit, a stop). Each module's newest
// lines within bound bytes (as stored) are kept in memory, which is what
// is served, and on disk under the state directory, so that a restarted
// agent serves them again. The log lives as long as its module is in the
// declaration: a program's restarts keep it, its module's leaving drops it.
type Book struct {
	dir   string // <state>/logs: a module's log is <module>.log, and <module>.log.1 before it
	bound int
	now   func() time.Time
	log   *slog.Logger

	mu   sync.Mutex
	logs map[string]*Log
}

func New(state string, bound int, now func() time.Time, log *slog.Logger) *Book {
	return &Book{dir: filepath.Join(state, "logs"), bound: bound, now: now, log: log, logs: map[string]*Log{}}
}

// of is module's log, read from disk the first time it is asked for.
func (b *Book) Of(module string) *Log {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.logs[module]; ok {
		return l
	}
	l := &Log{module: module, path: filepath.Join(b.dir, module+".log"), bound: b.bound, now: b.now, log: b.log, grew: make(chan struct{})}
	l.load()
	b.logs[module] = l
	return l
}

// has says whether module has a log: its program ran (or was tried) under
// this declaration, on this agent or the one before it.
func (b *Book) Has(module string) bool {
	b.mu.Lock()
	_, ok := b.logs[module]
	b.mu.Unlock()
	if ok {
		return true
	}
	_, err := os.Stat(filepath.Join(b.dir, module+".log"))
	return err == nil
}

// keepOnly drops the log of every module not in keep, in memory and on
// disk: its module left the declaration (perhaps while the agent was
// stopped), and what a module no longer on the node wrote is not kept for
// ever; bounded per module is bounded on disk only if modules that left
// take theirs with them.
func (b *Book) KeepOnly(keep map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for module, l := range b.logs {
		if !keep[module] {
			l.close()
			delete(b.logs, module)
		}
	}
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return // no logs yet, or none readable: nothing to drop
	}
	for _, e := range entries {
		module := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".1"), ".log")
		if !keep[module] {
			_ = os.Remove(filepath.Join(b.dir, e.Name()))
		}
	}
}

// Log is one module's log.
type Log struct {
	module string
	path   string // the segment written now; path+".1" the one before it
	bound  int
	now    func() time.Time
	log    *slog.Logger

	mu    sync.Mutex
	lines []stored // kept, oldest first: the newest within bound
	size  int      // bytes of lines as stored
	next  uint64   // the number of the next line (the first is 1)
	f     *os.File // the segment written now, nil until the next line
	fsize int      // bytes in it
	// failing is the disk's last error, said once until a write works
	// again: the program's output is kept in memory meanwhile.
	failing bool
	// closed: its module left and its files were removed; a line added
	// after (none should be) must not make them again.
	closed bool
	// grew is closed and made again at each line: what a --follow waits on.
	grew chan struct{}
}

// stored is a line as the log keeps it: its number and the line, a JSON
// object a line on disk.
type stored struct {
	N uint64 `json:"n"`
	wire.LogLine
	size int // its bytes on disk, newline included
}

func (s stored) encode() []byte {
	b, _ := json.Marshal(s) // strings and a time: always encodes
	return append(b, '\n')
}

// load reads what the agent before kept, oldest first: the segment
// before, then the current one. A line cut by a crash mid-write (the last
// one) is not a line and is passed over.
func (l *Log) load() {
	l.next = 1
	for _, path := range []string{l.path + ".1", l.path} {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			l.log.Warn("cannot read a program's kept log; it starts afresh", "module", l.module, "err", err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4*wire.MaxLogLine+1024)
		for sc.Scan() {
			var s stored
			if json.Unmarshal(sc.Bytes(), &s) != nil || s.N < l.next {
				continue
			}
			s.size = len(sc.Bytes()) + 1
			l.keep(s)
		}
		if path == l.path {
			if info, err := f.Stat(); err == nil {
				l.fsize = int(info.Size())
			}
		}
		f.Close()
	}
}

// keep appends s to the lines in memory, dropping the oldest beyond bound.
func (l *Log) keep(s stored) {
	l.lines = append(l.lines, s)
	l.size += s.size
	l.next = s.N + 1
	drop := 0
	for l.size > l.bound && drop < len(l.lines)-1 {
		l.size -= l.lines[drop].size
		drop++
	}
	if drop > 0 {
		// Copied down, not resliced: a slice that only moves forward
		// keeps every line it ever held in its backing array.
		l.lines = append(l.lines[:0], l.lines[drop:]...)
	}
}

// add keeps one line of stream, stamped now.
func (l *Log) Add(stream wire.LogStream, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := stored{N: l.next, LogLine: wire.LogLine{Time: l.now().UTC(), Stream: stream, Text: text}}
	b := s.encode()
	s.size = len(b)
	l.keep(s)
	if !l.closed {
		l.write(b)
	}
	close(l.grew)
	l.grew = make(chan struct{})
}

// write appends b to the current segment. When it would pass the bound the
// segment becomes the one before (the one before that is dropped), so the
// disk holds at most twice the bound and always the newest bound of lines.
func (l *Log) write(b []byte) {
	err := func() error {
		if l.f != nil && l.fsize+len(b) > l.bound {
			l.f.Close()
			l.f = nil
			if err := os.Rename(l.path, l.path+".1"); err != nil {
				return err
			}
			l.fsize = 0
		}
		if l.f == nil {
			if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
				return err
			}
			// 0600: a program's output may say what only the node's
			// owner should read.
			f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return err
			}
			l.f = f
		}
		// No fsync: the log is for reading a program's recent past, and
		// what the kernel holds survives the agent; a line a machine's
		// crash loses is not worth a sync a line.
		n, err := l.f.Write(b)
		l.fsize += n
		return err
	}()
	switch {
	case err != nil && !l.failing:
		l.failing = true
		l.log.Warn("cannot keep a program's output on disk; it is kept in memory until the disk takes it again", "module", l.module, "err", err)
	case err == nil && l.failing:
		l.failing = false
		l.log.Info("keeping a program's output on disk again", "module", l.module)
	}
}

// close lets go of the segment and removes the log from disk.
func (l *Log) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.closed = true
	_ = os.Remove(l.path)
	_ = os.Remove(l.path + ".1")
}

// maxAnswer bounds the lines of one answer, as JSON: well under what a
// node may publish (events.MaxReport), with room for the answer's fields.
const maxAnswer = 48 << 10

// read answers req from the lines kept, and, when there is nothing after
// req.After, the channel closed at the next line.
func (l *Log) Read(req wire.LogsRequest) (wire.LogsReply, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	reply := wire.LogsReply{Lines: []wire.LogLine{}, Last: l.next - 1}
	from := 0
	switch {
	case req.After >= l.next:
		// After a line this log never reached: its module left and came
		// back, and its log began again. From its start.
	case req.After > 0:
		// By number, not position: a line a crash cut is a gap.
		from = sort.Search(len(l.lines), func(i int) bool { return l.lines[i].N > req.After })
		if len(l.lines) > 0 && l.lines[0].N > req.After+1 {
			reply.Dropped = l.lines[0].N - req.After - 1
		}
	case req.Lines > 0:
		from = max(0, len(l.lines)-req.Lines)
	}
	if from >= len(l.lines) {
		return reply, l.grew
	}
	used := 0
	for _, s := range l.lines[from:] {
		if used+s.size > maxAnswer && len(reply.Lines) > 0 {
			reply.More = true
			break
		}
		used += s.size
		reply.Lines = append(reply.Lines, s.LogLine)
		reply.Last = s.N
	}
	return reply, nil
}
