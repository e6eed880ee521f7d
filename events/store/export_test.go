package store

// Remembered is how many appended sends s remembers, not yet read back.
func Remembered(s *Store) int {
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	return len(s.known.m)
}
