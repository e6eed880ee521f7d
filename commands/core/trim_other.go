//go:build !cgo || !linux

package core

// trimC does nothing without cgo (Pebble then allocates in the Go heap,
// which debug.FreeOSMemory returns) or off Linux.
func trimC() {}

// canTrim says whether trimC gives anything back here: never.
func canTrim() bool { return false }
