package liveness

// SetLogEach lowers how many nodes a check names in the log, for a test
// that loses a few rather than thousands; it answers the way back.
func SetLogEach(n int) (restore func()) {
	was := logEach.Swap(int64(n))
	return func() { logEach.Store(was) }
}
