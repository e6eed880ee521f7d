package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Usage is what the operating system counts of one process: CPU time (user
// and system, every thread), resident memory, now and at its peak, and the
// pages it has faulted in (minor faults, those the disk had no part in:
// mostly memory touched for the first time since the system gave it, or
// since it was given back).
type Usage struct {
	CPU       time.Duration
	RSS, Peak int64 // bytes
	Faults    int64
}

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's own tick, so
// the figures are in hundredths of a second (a push of 10,000 nodes costs
// the controller about a second: 1% resolution).
const userHZ = 100

// Self is this process's usage: getrusage, to the microsecond, since the
// bus mesh bench holds in this process costs a few hundred milliseconds a
// push.
func Self() (Usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, fmt.Errorf("bench: cannot read this process's CPU time: %w", err)
	}
	u := Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), Faults: ru.Minflt}
	var err error
	u.RSS, u.Peak, err = memory("self")
	return u, err
}

// Of is the usage of the process pid, from /proc (Linux): a child's CPU
// while it still runs, which getrusage gives only once it has exited.
func Of(pid int) (Usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("bench: cannot read process %d's CPU time from /proc (mesh bench needs Linux's /proc): %w", pid, err)
	}
	// The command's name, in parentheses, may hold spaces: the fields
	// counted from 3 (state) start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("bench: /proc/%d/stat has no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	// utime and stime are the 14th and 15th fields; f[0] is the 3rd.
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("bench: /proc/%d/stat has %d fields after the name", pid, len(f))
	}
	// minflt is the 10th.
	flt, err0 := strconv.ParseInt(string(f[7]), 10, 64)
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err0 != nil || err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("bench: /proc/%d/stat's minflt, utime and stime are not numbers", pid)
	}
	u := Usage{CPU: time.Duration(ut+st) * time.Second / userHZ, Faults: flt}
	u.RSS, u.Peak, err = memory(strconv.Itoa(pid))
	return u, err
}

// memory is VmRSS and VmHWM (the peak resident set) of /proc/PID/status.
func memory(pid string) (rss, peak int64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: cannot read process %s's memory from /proc: %w", pid, err)
	}
	for line := range bytes.Lines(b) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var into *int64
		switch string(name) {
		case "VmRSS":
			into = &rss
		case "VmHWM":
			into = &peak
		default:
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: /proc/%s/status's %s is not a number of kB", pid, name)
		}
		*into = kb << 10
	}
	return rss, peak, nil
}
