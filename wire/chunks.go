package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
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
	// b is whole already: sent in slices of itself, not copied into the
	// pieces' buffer first (Write's way, for an answer still being made).
	p := newPieces(nc, r)
	for p.err == nil && len(b) > p.limit {
		p.send(b[:p.limit])
		b = b[p.limit:]
	}
	p.buf = b
	return p.close()
}

// Listed is an answer whose bulk is one long list (status --json of a
// hundred thousand nodes): RespondListed encodes it an item at a time
// into the pieces, never the whole answer at once. json.Marshal of such an
// answer held its bytes twice and more (a buffer grown by doubling, then
// copied out): some 100 MiB at the peak of the controller at 100,000
// nodes, over issue 34's 700 MiB bound.
type Listed interface {
	// Listing is the answer without its list (rest's JSON must not name
	// the list's key), and the list.
	Listing() (rest any, list List)
}

// List is the long list of a Listed answer: its JSON key, its length and
// items, and whether it is nil (null, as json.Marshal writes a nil slice).
// Or, with Raw set, the JSON value under the key written as Raw makes it,
// whole: a value with a MarshalJSON of its own that json.Marshal would
// check and compact after it (status's brief table of 100,000 nodes, some
// 1.5 MB: its compacting was 7% of the controller's CPU a status).
type List struct {
	Key  string
	Len  int
	Item func(i int) any
	Nil  bool
	Raw  func() ([]byte, error)
}

// RespondListed sends l as the answer to r, as Respond sends its JSON,
// written by WriteListed straight into the pieces.
func RespondListed(nc *nats.Conn, r micro.Request, l Listed) error {
	w := newPieces(nc, r)
	if err := WriteListed(w, l); err != nil {
		return err
	}
	return w.close()
}

// WriteListed writes l's JSON to w, its list one item at a time: the
// bytes differ from json.Marshal's only in where the list's key stands and
// a newline after each item, and decode the same
// (TestAListedAnswerDecodesAsItsMarshal). A Raw list is its bytes as Raw
// makes them, neither checked nor compacted: Raw answers valid JSON
// (TestABriefListedAnswerDecodesAsItsMarshal for the status table's).
func WriteListed(w io.Writer, l Listed) error {
	rest, list := l.Listing()
	head, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	if len(head) < 2 || head[0] != '{' {
		return fmt.Errorf("a listed answer's rest is not a JSON object: %.20q", head)
	}
	k, err := json.Marshal(list.Key)
	if err != nil {
		return err
	}
	// Written on past an error: the writers this is given keep theirs
	// (the pieces, a bufio.Writer) or fail every write after (a closed
	// connection), so an item's or the last write says it.
	write := func(b []byte) { w.Write(b) }
	write(head[:1])
	write(k)
	write([]byte(":"))
	switch {
	case list.Raw != nil:
		b, err := list.Raw()
		if err != nil {
			return err
		}
		write(b)
	case list.Nil:
		write([]byte("null"))
	default:
		// The Encoder writes each item whole, through a buffer of its
		// own that is used again for the next: never the whole list.
		enc := json.NewEncoder(w)
		write([]byte("["))
		for i := range list.Len {
			if i > 0 {
				write([]byte(","))
			}
			if err := enc.Encode(list.Item(i)); err != nil {
				return err
			}
		}
		write([]byte("]"))
	}
	if len(head) > 2 { // the rest's fields after the list's
		write([]byte(","))
	}
	_, err = w.Write(head[1:])
	return err
}

// pieces is an answer being written: held until it outgrows one message,
// then sent a message at a time to the client's inbox, so that no more
// than a message's worth and one write is held at once.
type pieces struct {
	nc    *nats.Conn
	r     micro.Request
	to    string
	limit int
	buf   []byte
	sent  int
	err   error
}

func newPieces(nc *nats.Conn, r micro.Request) *pieces {
	p := &pieces{nc: nc, r: r, to: r.Headers().Get(ChunksToHeader), limit: int(nc.MaxPayload()) - chunkHeadroom}
	if p.to == "" || p.limit <= 0 {
		// No inbox to send pieces to (or no room in one): the answer is
		// one message or none, as the bus allows.
		p.limit = math.MaxInt
	}
	return p
}

// Write never fails itself: an error sending a piece is kept, and close
// answers it.
func (p *pieces) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for p.err == nil && len(p.buf) > p.limit {
		p.send(p.buf[:p.limit])
		p.buf = p.buf[:copy(p.buf, p.buf[p.limit:])]
	}
	return len(b), nil
}

// send publishes one piece; the connection copies it before returning, so
// its bytes may be written over after.
func (p *pieces) send(b []byte) {
	m := nats.NewMsg(p.to)
	m.Header.Set(ChunkIndexHeader, strconv.Itoa(p.sent))
	m.Data = b
	if p.err = p.nc.PublishMsg(m); p.err == nil {
		p.sent++
	}
}

// close sends what is held: as the answer itself when it fits in one
// message, else as the last piece, and then the answer saying how many.
func (p *pieces) close() error {
	if p.err != nil {
		return p.err
	}
	if p.sent == 0 {
		return p.r.Respond(p.buf)
	}
	if len(p.buf) > 0 {
		if p.send(p.buf); p.err != nil {
			return p.err
		}
	}
	return p.r.Respond(nil, micro.WithHeaders(micro.Headers{ChunkCountHeader: {strconv.Itoa(p.sent)}}))
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
	// Sized once: grown piece by piece, a status of 100,000 nodes (some
	// 3 MB) was copied again at each doubling into pages the client had
	// never touched, a tenth of the command's CPU in page faults.
	size := 0
	for _, m := range got {
		size += len(m.Data)
	}
	b := make([]byte, 0, size)
	for _, m := range got {
		b = append(b, m.Data...)
	}
	return b, nil
}
