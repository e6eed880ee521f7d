package artifact

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// A node reads an object only through a consumer the controller made for
// it (rule 18): the node asks on events.ArtifactSubject(node) for one
// digest; the controller checks that the node's declaration names it, and
// makes the consumer named for the node, whose filter is that object's
// chunks alone. The node's identity may read that one consumer (its
// information and its next messages) and nothing else of the bucket's
// stream: no object by name, no listing, no stream information, no
// consumer of its own, no direct get. The bytes go from the bus to the
// node; the controller's part is one consumer a fetch.

// HandRequest is what an agent asks for: the object of one digest.
type HandRequest struct {
	Digest string `json:"digest"`
}

// Handed is the controller's answer: the consumer to read (in Stream,
// named Consumer) and how many chunks and bytes it delivers, or why not.
// Refused is a refusal the agent must not ask again for (the declaration
// does not name it, or the bucket lost it); Error one it may.
type Handed struct {
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Chunks   uint32 `json:"chunks,omitempty"`
	Size     uint64 `json:"size,omitempty"`
	Refused  string `json:"refused,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ConsumerName is the one consumer a node reads artifacts through: its
// name, so that the bus can grant that consumer to that node alone.
func ConsumerName(node string) string { return node }

// handIdle is how long a consumer handed to a node outlives its last read:
// a fetch that stopped leaves nothing behind for long.
const handIdle = time.Minute

// Hand makes node's consumer of the object named digest, replacing the one
// it had (a node fetches one artifact at a time), and answers what the
// agent needs to read it.
func Hand(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, node, digest string) Handed {
	info, err := obs.GetInfo(ctx, digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return Handed{Refused: fmt.Sprintf("the bucket %s holds no object %s, though the log says it does: put the artifact again (mesh artifact put FILE)", events.ArtifactBucket, digest)}
	}
	if err != nil {
		return Handed{Error: err.Error()}
	}
	name := ConsumerName(node)
	if err := js.DeleteConsumer(ctx, events.ArtifactStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return Handed{Error: err.Error()}
	}
	_, err = js.CreateConsumer(ctx, events.ArtifactStream, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     ChunkSubject(info.NUID),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: handIdle,
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return Handed{Error: err.Error()}
	}
	return Handed{Stream: events.ArtifactStream, Consumer: name, Chunks: info.Chunks, Size: info.Size}
}

// ChunkSubject is where the object store keeps the chunks of the object
// whose NUID is nuid.
func ChunkSubject(nuid string) string { return "$O." + events.ArtifactBucket + ".C." + nuid }

// ValidHandRequest says why a request is not one an agent makes ("" when
// it is).
func ValidHandRequest(r HandRequest) string {
	if len(r.Digest) != 64 || strings.Trim(r.Digest, "0123456789abcdef") != "" {
		return "the request names no sha256 digest"
	}
	return ""
}
