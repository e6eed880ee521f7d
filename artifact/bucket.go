package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultMaxBytes is the largest artifact a mesh takes unless told
// otherwise (mesh up --artifact-max): a program's binary, a tarball of a
// site, not a disk image.
const DefaultMaxBytes int64 = 512 << 20

// Assert makes the artifacts' bucket, or corrects what the mesh owns of it
// (rule 15): file storage, replicas. It holds nothing the mesh forgets: an
// object goes only with mesh artifact rm.
func Assert(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.ObjectStore, error) {
	if replicas < 1 {
		replicas = 1
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      events.ArtifactBucket,
		Description: "mesh artifacts, each object named by the sha256 of its bytes (mesh artifact put)",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot assert the artifacts' bucket %s: %w", events.ArtifactBucket, err)
	}
	return obs, nil
}

// Bucket binds to the artifacts' bucket, which the controller asserts.
func Bucket(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, events.ArtifactBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("the bus has no artifacts' bucket %s: start the controller (mesh up or mesh serve) of this version first, which makes it", events.ArtifactBucket)
	}
	return obs, err
}

// HashFile is the sha256 (hex) and size of the file at path, read in
// pieces: a file larger than memory hashes.
func HashFile(path string) (digest string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return Hash(f)
}

// Hash is the sha256 (hex) and length of what r holds, read in pieces.
func Hash(r io.Reader) (digest string, size int64, err error) {
	h := sha256.New()
	size, err = io.Copy(h, r)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// Check reads the object named digest back from the bucket and answers its
// size when its bytes are exactly digest's; an object whose bytes are not
// is deleted (it stands under a name it does not have, and a node would
// refuse it), and the error names both digests. It reads in pieces: the
// controller's memory does not grow with the artifact.
func Check(ctx context.Context, obs jetstream.ObjectStore, digest string) (int64, error) {
	r, err := obs.Get(ctx, digest)
	if err != nil {
		return 0, err
	}
	got, size, err := Hash(r)
	r.Close()
	if err != nil {
		return 0, fmt.Errorf("cannot read the object %s back: %w", digest, err)
	}
	if got != digest {
		_ = obs.Delete(ctx, digest)
		return 0, &MismatchError{What: "the object uploaded", Want: digest, Got: got}
	}
	return size, nil
}

// MismatchError is bytes whose sha256 is not the digest that named them:
// the object is not written anywhere under that name.
type MismatchError struct {
	What      string // "the object uploaded", "/usr/local/bin/app"
	Want, Got string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s should have sha256 %s and has %s: its bytes are not what was signed, so nothing was written", e.What, e.Want, e.Got)
}
