package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RefusedError is the controller's refusal to hand an object: asking
// again would be answered the same, until the declaration or the bucket
// changes.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// inFlight is how many chunks a fetch lets the bus send before the agent
// has written them: at the object store's 128 KiB chunks, half a MiB.
const inFlight = 4

// Fetch asks the controller for the object of digest (size bytes, as the
// signed declaration says) and writes its bytes to w as they arrive,
// hashing them: it answers a *MismatchError when they are not digest's (w
// then holds bytes to throw away), a *RefusedError when the controller
// will not hand them, and any other error for a fetch to try again.
func Fetch(ctx context.Context, nc *nats.Conn, node, path, digest string, size int64, w io.Writer) error {
	req, _ := json.Marshal(HandRequest{Digest: digest})
	msg, err := nc.RequestWithContext(ctx, events.ArtifactSubject(node), req)
	if err != nil {
		return fmt.Errorf("cannot ask the controller for artifact %s: %w", digest, err)
	}
	var h Handed
	if err := json.Unmarshal(msg.Data, &h); err != nil {
		return fmt.Errorf("the controller's answer for artifact %s does not decode: %w", digest, err)
	}
	switch {
	case h.Refused != "":
		return &RefusedError{Reason: h.Refused}
	case h.Error != "":
		return errors.New(h.Error)
	case int64(h.Size) != size:
		// The object under that name is another size than the signed
		// declaration says: it is not those bytes, whatever it holds.
		return &MismatchError{What: path, Want: fmt.Sprintf("%s (%d bytes)", digest, size), Got: fmt.Sprintf("an object of %d bytes", h.Size)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	hash := sha256.New()
	if err := read(ctx, js, h, io.MultiWriter(w, hash)); err != nil {
		return err
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != digest {
		return &MismatchError{What: path, Want: digest, Got: got}
	}
	return nil
}

// read writes every chunk h's consumer delivers, in order, to w. A chunk
// missing (a gap in the consumer's sequence) is an error to try again,
// never bytes skipped.
func read(ctx context.Context, js jetstream.JetStream, h Handed, w io.Writer) error {
	if h.Chunks == 0 {
		return nil
	}
	c, err := js.Consumer(ctx, h.Stream, h.Consumer)
	if err != nil {
		return fmt.Errorf("cannot read the consumer the controller made: %w", err)
	}
	it, err := c.Messages(jetstream.PullMaxMessages(inFlight))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for n := uint64(1); n <= uint64(h.Chunks); n++ {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the artifact's chunk %d of %d did not come: %w", n, h.Chunks, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.Sequence.Consumer != n {
			return fmt.Errorf("the artifact's chunk %d came as %d: a chunk was lost; fetching it again", n, md.Sequence.Consumer)
		}
		if _, err := w.Write(m.Data()); err != nil {
			return err
		}
	}
	return nil
}

// FetchTimeout bounds one artifact's fetch by an agent: 50 MiB over a
// slow link is minutes, not hours, and a fetch cut short is asked again.
const FetchTimeout = 10 * time.Minute
