package world

import (
	"testing"
	"unsafe"
)

// A Go map keeps a value of more than 128 bytes (internal/abi's
// MapMaxElemBytes) in an object of its own: the would-sends of 100,000
// nodes were then 100,000 objects, and copying their map after a
// composition change 100,000 allocations (issue 34). Fails when a field
// added to Would makes it too large to sit in its map's slot.
func TestAWouldFitsInItsMapSlot(t *testing.T) {
	t.Parallel()
	if size := unsafe.Sizeof(Would{}); size > 128 {
		t.Fatalf("a Would is %d bytes: over 128, a map of them holds each in an object of its own; put what most nodes lack behind Short", size)
	}
}
