package embeddedtest

import (
	"bytes"
	"sync"
)

// LockedBuffer is a log that a controller, an agent or a command writes
// from goroutines of its own while the test reads it: a bytes.Buffer
// written and read at once is a race.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
