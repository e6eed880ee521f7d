package wire

import (
	"context"
	"fmt"
	"slices"
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

// Respond sends b as the answer to r, in pieces when it is too large: the
// controller's half of the protocol.
func Respond(nc *nats.Conn, r micro.Request, b []byte) error {
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

// Assemble gathers the pieces an answer said were sent, in their order:
// the client's half, reading pieces from the inbox it named in
// ChunksToHeader.
func Assemble(ctx context.Context, answer *nats.Msg, pieces <-chan *nats.Msg) ([]byte, error) {
	n, err := strconv.Atoi(answer.Header.Get(ChunkCountHeader))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("the controller's answer says it came in %q pieces", answer.Header.Get(ChunkCountHeader))
	}
	got := make([]*nats.Msg, 0, n)
	for len(got) < n {
		select {
		case m := <-pieces:
			got = append(got, m)
		case <-ctx.Done():
			return nil, fmt.Errorf("only %d of the %d pieces of the controller's answer arrived", len(got), n)
		}
	}
	slices.SortFunc(got, func(a, b *nats.Msg) int {
		x, _ := strconv.Atoi(a.Header.Get(ChunkIndexHeader))
		y, _ := strconv.Atoi(b.Header.Get(ChunkIndexHeader))
		return x - y
	})
	var b []byte
	for _, m := range got {
		b = append(b, m.Data...)
	}
	return b, nil
}
