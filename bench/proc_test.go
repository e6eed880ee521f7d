package bench

import (
	"os"
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
