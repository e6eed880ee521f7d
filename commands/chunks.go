package commands

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
	chunksToHeader   = "Mesh-Chunks-To" // on a request: where pieces of a large answer go
	chunkCountHeader = "Mesh-Chunks"    // on an answer: how many pieces went there
	chunkIndexHeader = "Mesh-Chunk"     // on a piece: its place
	// chunkHeadroom leaves room in a piece for its headers.
	chunkHeadroom = 4096
)

// respond sends b as the answer to r, in pieces when it is too large.
func respond(nc *nats.Conn, r micro.Request, b []byte) error {
	limit := int(nc.MaxPayload()) - chunkHeadroom
	to := r.Headers().Get(chunksToHeader)
	if len(b) <= limit || to == "" || limit <= 0 {
		return r.Respond(b)
	}
	n := 0
	for off := 0; off < len(b); off += limit {
		m := nats.NewMsg(to)
		m.Header.Set(chunkIndexHeader, strconv.Itoa(n))
		m.Data = b[off:min(off+limit, len(b))]
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		n++
	}
	return r.Respond(nil, micro.WithHeaders(micro.Headers{chunkCountHeader: {strconv.Itoa(n)}}))
}

// assemble gathers the pieces an answer said were sent, in their order.
func assemble(ctx context.Context, answer *nats.Msg, pieces <-chan *nats.Msg) ([]byte, error) {
	n, err := strconv.Atoi(answer.Header.Get(chunkCountHeader))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("the controller's answer says it came in %q pieces", answer.Header.Get(chunkCountHeader))
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
		x, _ := strconv.Atoi(a.Header.Get(chunkIndexHeader))
		y, _ := strconv.Atoi(b.Header.Get(chunkIndexHeader))
		return x - y
	})
	var b []byte
	for _, m := range got {
		b = append(b, m.Data...)
	}
	return b, nil
}
