package store

import "time"

// Remembered is how many appended sends s remembers, not yet read back:
// in flight or acknowledged.
func Remembered(s *Store) int {
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	return len(s.known.m) + len(s.known.acked)
}

// SetOwnGrace makes the own reader's wait behind an undelivered sequence
// d for the test.
func SetOwnGrace(t interface{ Cleanup(func()) }, d time.Duration) {
	old := ownGrace
	ownGrace = d
	t.Cleanup(func() { ownGrace = old })
}

// SetOwnTail makes the own reader look at the stream's end every d.
func SetOwnTail(t interface{ Cleanup(func()) }, d time.Duration) {
	old := ownTail
	ownTail = d
	t.Cleanup(func() { ownTail = old })
}

// SetRememberAppends makes a store remember n sends whole.
func SetRememberAppends(t interface{ Cleanup(func()) }, n int) {
	old := rememberAppends
	rememberAppends = n
	t.Cleanup(func() { rememberAppends = old })
}
