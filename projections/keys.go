package projections

import "encoding/binary"

// Key layout: every key starts with a prefix byte naming its read model.
// 0x00 is reserved for meta (checkpoint, schema, stream identity), so a scan of
// any read model can never see bookkeeping rows. Integers are fixed-width big
// endian so that byte order is numeric order.
const (
	prefixMeta           byte = 0x00
	prefixNode           byte = 0x01
	prefixModule         byte = 0x02 // module name -> ModuleRow
	prefixBuild          byte = 0x03 // module, build -> canonical manifest bytes
	prefixAssign         byte = 0x04 // node, module -> AssignmentRow
	prefixAssignByModule byte = 0x05 // module, node -> nothing: "where is it assigned"
	prefixStanding       byte = 0x06 // provider, machine, consumer -> Standing
	prefixHistory        byte = 0x07 // node, seq -> kind and time (history.go)
	prefixForeign        byte = 0x08 // seq -> ForeignMessage (foreign.go)
	prefixForeignOpen    byte = 0x09 // seq -> nothing: the foreign messages not acknowledged
	prefixReportKey      byte = 0x0a // node -> the public key its reports are signed with
	prefixCredential     byte = 0x0b // provider, consumer -> Rotation (credentials.go)
	prefixRuntime        byte = 0x0c // node, module -> Runtime (runtimes.go)
	prefixDrift          byte = 0x0d // node -> Drift, the last it reported
	prefixFacts          byte = 0x0e // node -> Facts, the last its agent reported
	prefixRollout        byte = 0x0f // id -> Rollout (rollouts.go)
	prefixNetwork        byte = 0x10 // 'm' -> Network; 'a', address (16 bytes) -> AddressRow (network.go)
	prefixNodeAddress    byte = 0x11 // node -> its overlay address
	prefixSeat           byte = 0x12 // seat -> Seat (seats.go)
	prefixLiveness       byte = 0x13 // node -> Liveness (liveness.go)
	prefixNodeKeys       byte = 0x14 // node -> NodeKeys, the keys it made (nodekeys.go)
	prefixToken          byte = 0x15 // id -> Token (nodekeys.go)
	prefixFlood          byte = 0x16 // seq -> Flood (flood.go)
	prefixArtifact       byte = 0x17 // artifact name -> ArtifactRow (artifacts.go)
	prefixArtifactObject byte = 0x18 // digest -> ArtifactObject, its size and the names holding it
	prefixOperator       byte = 0x19 // name -> Operator (operators.go)
	prefixHandHeld       byte = 0x1a // node -> nothing: its last declaration was written by hand (nodes.go)
)

// sep joins two names in a key. Names never hold a 0 byte (see
// events.ValidateName), so "a"+sep+"bc" and "ab"+sep+"c" cannot collide, and
// a scan of prefix+name+sep finds exactly that name's rows.
const sep = 0x00

var (
	keyCheckpoint = []byte{prefixMeta, 'c'}
	keyIdentity   = []byte{prefixMeta, 'i'}
	keySchema     = []byte{prefixMeta, 's'}
	// keyComposition is the sequence of the last event that can change what
	// a node would be composed to: caches of composition are keyed by it.
	keyComposition = []byte{prefixMeta, 'v'}
	// keyLatest is the latest moment of any event folded (unix nanoseconds):
	// what says which snapshot may answer time travel to a moment.
	keyLatest = []byte{prefixMeta, 't'}
	// keyHistoryFrom, while set, is the event up to which the history index is not
	// here yet: read models started from a brief snapshot (published.go).
	keyHistoryFrom = []byte{prefixMeta, 'h'}
)

// schemaVersion changes whenever a row's encoding or a fold changes meaning.
// Read models of another schema are refused; they are rebuilt, never migrated.
//
//	1  nodes
//	2  catalogue and assignments
//	3  assignment rows in the binary codec of rows/assignment.go
//	4  last declaration sent and last report on the node row
//	5  standings; failing-since on the node row; the composition version in meta
//	6  the history index
//	7  node rows in the compact codec of rows/node.go
//	8  history rows hold what history shows, not only the sequence
//	9  foreign messages set aside; report keys; only the rightful writer's events folded
//	10 the latest moment folded, in meta (snapshots for time travel)
//	11 credential rotations
//	12 runtimes and drift
//	13 facts; declared capabilities and labels that change
//	14 rollouts
//	15 an assignment's upgrade policy in its row; the overlay's addresses; seats
//	16 enrolment tokens; the keys a node made itself, which its reports are held to
//	17 standings only of a provider on its machine toward a consumer resolved to it
//	18 a token's version moves with each use and its revoke
//	19 a rotation's overlap and its completion
//	20 a runtime's health (starting, healthy, unhealthy) in its row
//	22 artifacts: each name's row and each digest's; the artifact a runtime runs; operators; who
//	   asked (the envelope's by) on history rows and a node's last send
//	23 the nodes a hand declaration holds, as an index (a named push reads no other row)
//	24 history rows keep a digest as its 32 bytes, not 64 characters of hex (rows/history.go)
//	25 node rows likewise, their codec's version 2 (rows/node.go)
//	26 liveness rows in the compact form (rows/liveness.go), not JSON
const schemaVersion = 26

func nodeKey(name string) []byte { return append([]byte{prefixNode}, name...) }

func moduleKey(name string) []byte { return append([]byte{prefixModule}, name...) }

func pairKey(prefix byte, a, b string) []byte {
	k := append([]byte{prefix}, a...)
	k = append(k, sep)
	return append(k, b...)
}

func pairPrefix(prefix byte, a string) []byte { return append(append([]byte{prefix}, a...), sep) }

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
