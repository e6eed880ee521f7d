package bench

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The operating system's figures: this process, read both ways, has spent
// CPU and holds memory; a process that does not exist is an error, not a
// zero that would make any push look free.
func TestUsageIsTheOperatingSystems(t *testing.T) {
	t.Parallel()
	// Spend at least two of /proc's hundredths of a second first.
	self, err := Self()
	for x := 0; err == nil && self.CPU < 20*time.Millisecond; x++ {
		self, err = Self()
	}
	if err != nil {
		t.Fatal(err)
	}
	proc, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []Usage{self, proc} {
		if u.CPU < 10*time.Millisecond || u.RSS <= 0 || u.Peak < u.RSS {
			t.Fatalf("usage %+v: a running test has spent CPU and holds memory, at most its peak", u)
		}
	}
	if _, err := Of(1 << 30); err == nil {
		t.Fatal("a process that does not exist has a usage")
	}
}

// Pages touched for the first time are counted as faulted in, both ways:
// mesh bench prints them beside each push, since on a virtual machine a
// first touch can cost more CPU than the work that made it.
func TestUsageCountsPagesFaultedIn(t *testing.T) {
	const pages = 1024
	size := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, pages*size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	// Small pages, one fault each: where transparent huge pages are on
	// for every mapping, 1,024 touches were some ten faults.
	if err := syscall.Madvise(mem, syscall.MADV_NOHUGEPAGE); err != nil {
		t.Fatal(err)
	}
	self0, err0 := Self()
	proc0, err1 := Of(os.Getpid())
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	for i := 0; i < len(mem); i += size {
		mem[i] = 1
	}
	self1, err0 := Self()
	proc1, err1 := Of(os.Getpid())
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	// The test's other goroutines may fault in pages too, never fewer.
	if d := self1.Faults - self0.Faults; d < pages {
		t.Errorf("getrusage counted %d pages faulted in, want at least the %d touched", d, pages)
	}
	if d := proc1.Faults - proc0.Faults; d < pages {
		t.Errorf("/proc counted %d pages faulted in, want at least the %d touched", d, pages)
	}
}
