package projections

import "encoding/binary"

// Key layout: every key starts with a prefix byte naming its read model.
// 0x00 is reserved for meta (checkpoint, schema, stream identity), so a scan of
// any read model can never see bookkeeping rows. Integers are fixed-width big
// endian so that byte order is numeric order.
const (
	prefixMeta byte = 0x00
	prefixNode byte = 0x01
)

var (
	keyCheckpoint = []byte{prefixMeta, 'c'}
	keyIdentity   = []byte{prefixMeta, 'i'}
	keySchema     = []byte{prefixMeta, 's'}
)

// schemaVersion changes whenever a row's encoding or a fold changes meaning.
// Read models of another schema are refused; they are rebuilt, never migrated.
const schemaVersion = 1

func nodeKey(name string) []byte { return append([]byte{prefixNode}, name...) }

// prefixBounds gives the [lower, upper) bounds of every key starting with prefix.
func prefixBounds(prefix ...byte) (lower, upper []byte) {
	lower = append([]byte(nil), prefix...)
	upper = append([]byte(nil), prefix...)
	for i := len(upper) - 1; i >= 0; i-- {
		upper[i]++
		if upper[i] != 0 {
			return lower, upper[:i+1]
		}
	}
	return lower, nil // every byte was 0xff: no upper bound
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
