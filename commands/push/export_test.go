package push

// SetWindow sets how many declarations a push seals and appends at a time,
// and answers what puts it back.
func SetWindow(n int) (restore func()) {
	was := pushWindow
	pushWindow = n
	return func() { pushWindow = was }
}
