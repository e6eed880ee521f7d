package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/nats-io/nats.go/jetstream"
)

// backupArtifacts is the directory of a backup holding the artifacts'
// bytes (issue 32), a file each, named by its digest: the log holds only
// their digests, and a restored mesh must be able to hand them to nodes.
const backupArtifacts = "artifacts"

// saveArtifacts writes every object of the artifacts' bucket into the
// backup, in pieces, each checked against the digest that names it. A
// bus without the bucket (a mesh older than artifacts) has none to save.
func saveArtifacts(ctx context.Context, js jetstream.JetStream, dir string) (int, error) {
	obs, err := js.ObjectStore(ctx, events.ArtifactBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, backupArtifacts), 0o700); err != nil {
		return 0, err
	}
	n := 0
	for _, info := range infos {
		if !manifest.ValidDigest(info.Name) {
			continue // not the mesh's: it names every object by its digest
		}
		if err := saveObject(ctx, obs, info.Name, filepath.Join(dir, backupArtifacts, info.Name)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func saveObject(ctx context.Context, obs jetstream.ObjectStore, digest, path string) error {
	r, err := obs.Get(ctx, digest)
	if err != nil {
		return fmt.Errorf("cannot read artifact %s from the bus: %w", digest, err)
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	got, _, err := artifact.Hash(io.TeeReader(r, f))
	if err == nil && got != digest {
		err = &artifact.MismatchError{What: "the bucket's object " + digest, Want: digest, Got: got}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadArtifacts puts the backup's artifacts into the bus's bucket (made
// if missing; the controller corrects its replicas at start), each
// checked against its digest first, in pieces; one the bucket holds
// already is left. It answers how many it put and how many were there.
func loadArtifacts(ctx context.Context, js jetstream.JetStream, dir string) (put, there int, err error) {
	entries, err := os.ReadDir(filepath.Join(dir, backupArtifacts))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil // a backup older than artifacts, or of a mesh without any
	}
	if err != nil {
		return 0, 0, err
	}
	obs, err := artifact.Assert(ctx, js, 1)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		digest := e.Name()
		if !manifest.ValidDigest(digest) {
			continue
		}
		if _, err := obs.GetInfo(ctx, digest); err == nil {
			there++
			continue
		}
		path := filepath.Join(dir, backupArtifacts, digest)
		if got, _, err := artifact.HashFile(path); err != nil || got != digest {
			return put, there, fmt.Errorf("the backup's artifact %s is not those bytes (sha256 %s, %v): the backup is damaged; nothing of it was put", digest, got, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return put, there, err
		}
		_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: digest}, f)
		f.Close()
		if err != nil {
			return put, there, fmt.Errorf("cannot put the backup's artifact %s into the bus: %w; mesh restore again finishes it", digest, err)
		}
		put++
	}
	return put, there, nil
}
