package store

import (
	"context"
	"time"
)

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

// ReadAhead is one own reader's read of the stream from from to upto, as
// it reads what neither memory nor its consumer handed on, behind being
// what the consumer said it had still to deliver with its last message,
// at from-1: it answers what the reader handed on.
func ReadAhead(ctx context.Context, s *Store, from, upto, behind uint64) ([]Msg, error) {
	var out []Msg
	r := &ownRead{s: s, next: from, at: from - 1, behind: behind, fn: func(m Msg) error {
		out = append(out, m)
		return nil
	}}
	err := r.fetch(ctx, upto)
	return out, err
}

// IdleAt runs one look at the stream's end (ownTail's) of an own reader at
// next, behind messages still to come from its consumer, that has handed
// something on since its last look or not (moved), and answers whether it
// said it was idle.
func IdleAt(ctx context.Context, s *Store, next, behind uint64, moved bool) (bool, error) {
	said := false
	r := &ownRead{s: s, next: next, at: next - 1, behind: behind, ticked: next, onIdle: func() { said = true },
		fn: func(Msg) error { return nil }}
	if moved {
		r.ticked = next - 1
	}
	err := r.idle(ctx)
	return said, err
}

// SetAckWait makes how long a window of AppendMany waits for its
// acknowledgements d for the test.
func SetAckWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := ackWait
	ackWait = d
	t.Cleanup(func() { ackWait = old })
}

// AckWindows is how many of AppendMany's windows await acknowledgements.
func AckWindows(s *Store) int {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	return len(s.acks.windows)
}
