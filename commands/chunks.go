package commands

import (
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// An answer can be larger than one NATS message may be (status of ten
// thousand nodes, a push to them, node list --json): the bus's max payload
// is 1 MiB by default. So every request names an inbox of the client's; an
// answer too large for one message is sent there in pieces, in order, on the
// controller's one connection, and the answer itself only says how many.
const (
	ChunksToHeader   = "Mesh-Chunks-To" // on a request: where pieces of a large answer go
	ChunkCountHeader = "Mesh-Chunks"    // on an answer: how many pieces went there
	ChunkIndexHeader = "Mesh-Chunk"     // on a piece: its place
	// chunkHeadroom leaves room in a piece for its headers.
	chunkHeadroom = 4096
)

// respond sends b as the answer to r, in pieces when it is too large.
func respond(nc *nats.Conn, r micro.Request, b []byte) error {
	limit := int(nc.MaxPayload()) - chunkHeadroom
	to := r.Headers().Get(ChunksToHeader)
	if len(b) <= limit || to == "" || limit <= 0 {
		return r.Respond(b)
	}
	n := 0
	for off := 0; off < len(b); off += limit {
		m := nats.NewMsg(to)
		m.Header.Set(ChunkIndexHeader, strconv.Itoa(n))
		m.Data = b[off:min(off+limit, len(b))]
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		n++
	}
	return r.Respond(nil, micro.WithHeaders(micro.Headers{ChunkCountHeader: {strconv.Itoa(n)}}))
}
