package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshctl/mesh/artifact"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ArtifactCmd groups the artifacts' verbs (issue 32).
type ArtifactCmd struct {
	Put  ArtifactPutCmd  `cmd:"" help:"Store a file in the mesh, by its sha256: a manifest's artifact resource installs it."`
	List ArtifactListCmd `cmd:"" help:"Every artifact: its name, digest, size and when it was put."`
	Show ArtifactShowCmd `cmd:"" help:"One artifact: every digest stored under its name, and the nodes whose last declaration installs one."`
	Rm   ArtifactRmCmd   `cmd:"" help:"Remove an artifact's name and its bytes; refused while a node's last declaration installs them."`
}

type ArtifactPutCmd struct {
	File string `arg:"" type:"existingfile" help:"The file to store."`
	Name string `help:"The name manifests use (default: the file's name)."`
	JSON bool   `help:"Print {upload, changed, seq, artifact} as JSON."`
}

func (c *ArtifactPutCmd) Help() string {
	return "Examples:\n  mesh artifact put ./mesh-greeter\n  mesh artifact put build/app-linux-amd64 --name app\n\n" +
		"The file is hashed and sent to the bus's object store in pieces, never held whole in memory;\n" +
		"the controller reads it back, checks its sha256 and records it. Registering a module whose\n" +
		"artifact resource names it then takes that digest into the build: a new put, registered, is a new build."
}

// putTimeout bounds a put's answers: the controller reads the whole
// object back before it answers.
const putTimeout = 5 * time.Minute

func (c *ArtifactPutCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	name := c.Name
	if name == "" {
		name = filepath.Base(c.File)
	}
	digest, size, err := artifact.HashFile(c.File)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", c.File, err)
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = g.TimeoutOr(putTimeout)
	req := wire.ArtifactPutRequest{CommandID: wire.NewCommandID(), Name: name, Digest: digest, Size: size}
	var r wire.ArtifactPut
	if err := cl.Call(ctx, wire.SubjectArtifactPut, req, &r); err != nil {
		return err
	}
	uploaded := r.Upload
	if r.Upload {
		if err := upload(ctx, cl.NC, c.File, digest); err != nil {
			return err
		}
		r = wire.ArtifactPut{}
		if err := cl.Call(ctx, wire.SubjectArtifactPut, req, &r); err != nil {
			return err
		}
		if r.Upload {
			return fmt.Errorf("the controller does not find the bytes of %s in bucket %s after the upload; put it again", c.File, r.Bucket)
		}
	}
	r.Upload = uploaded
	if c.JSON {
		r.Artifact.Versions = cmdline.NonNil(r.Artifact.Versions)
		return text.JSON(out.Out, r)
	}
	switch {
	case r.Changed && uploaded:
		fmt.Fprintf(out.Out, "stored %s as artifact %s: sha256 %s, %d bytes (event %d)\n", filepath.Base(c.File), name, digest, size, r.Seq)
	case r.Changed:
		fmt.Fprintf(out.Out, "artifact %s stands for sha256 %s, %d bytes, which the mesh held already (event %d)\n", name, digest, size, r.Seq)
	default:
		fmt.Fprintf(out.Out, "nothing to do: artifact %s is sha256 %s already\n", name, digest)
	}
	if r.Changed {
		fmt.Fprintf(out.Out, "a module naming it takes these bytes when registered again (mesh module register FILE)\n")
	}
	return nil
}

// upload sends the file's bytes to the bucket under its digest, in the
// object store's chunks, read from the file as they go.
func upload(ctx context.Context, nc *nats.Conn, file, digest string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	obs, err := artifact.Bucket(ctx, js)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: digest}, f); err != nil {
		return fmt.Errorf("cannot upload %s to the bus: %w; nothing was recorded, put it again", file, err)
	}
	return nil
}

type ArtifactListCmd struct {
	JSON bool `help:"Print {artifacts} as JSON."`
}

func (c *ArtifactListCmd) Help() string { return "Examples:\n  mesh artifact list" }

func (c *ArtifactListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.ArtifactList
	if err := g.Call(ctx, wire.SubjectArtifactList, wire.Empty{}, &r); err != nil {
		return err
	}
	if c.JSON {
		for i := range r.Artifacts {
			r.Artifacts[i].Versions = cmdline.NonNil(r.Artifacts[i].Versions)
		}
		return text.JSON(out.Out, r)
	}
	if len(r.Artifacts) == 0 {
		fmt.Fprintln(out.Out, "no artifacts yet; mesh artifact put FILE stores one")
	}
	for _, a := range r.Artifacts {
		fmt.Fprintln(out.Out, artifactLine(a))
	}
	return nil
}

// artifactLine says an artifact's name and latest bytes in one line.
func artifactLine(a wire.ArtifactRow) string {
	older := ""
	if n := len(a.Versions) - 1; n > 0 {
		older = fmt.Sprintf(" (and %d older digest(s) kept)", n)
	}
	return fmt.Sprintf("%s  sha256 %s  %d bytes  put %s by %s%s", a.Name, a.Digest, a.Size, text.Time(a.StoredAt), a.By, older)
}

type ArtifactShowCmd struct {
	Name string `arg:""`
	JSON bool   `help:"Print the artifact, its digests and the nodes installing them as JSON."`
}

func (c *ArtifactShowCmd) Help() string { return "Examples:\n  mesh artifact show mesh-greeter" }

func (c *ArtifactShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.ArtifactView
	if err := g.Call(ctx, wire.SubjectArtifactShow, wire.NameRequest{Name: c.Name}, &r); err != nil {
		return err
	}
	if c.JSON {
		r.Versions, r.InForce = cmdline.NonNil(r.Versions), cmdline.NonNil(r.InForce)
		return text.JSON(out.Out, r)
	}
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	fmt.Fprintln(w, artifactLine(r.ArtifactRow))
	for _, v := range r.Versions {
		fmt.Fprintf(w, "  sha256 %s  %d bytes  put %s by %s (event %d)\n", v.Digest, v.Size, text.Time(v.StoredAt), v.By, v.Seq)
	}
	if len(r.InForce) == 0 {
		fmt.Fprintln(w, "no node's last declaration installs it")
	}
	for _, u := range r.InForce {
		fmt.Fprintf(w, "  installed at %s on %s by declaration %d (%s)\n", u.Path, u.Node, u.Sequence, manifest.ShortBuild(u.Digest))
	}
	return nil
}

type ArtifactRmCmd struct {
	Name string `arg:""`
	JSON bool   `help:"Print {changed, seq, name, digests, deleted} as JSON."`
}

func (c *ArtifactRmCmd) Help() string {
	return "Examples:\n  mesh artifact rm old-tool\n\nEvery digest stored under the name goes; bytes another name stands for stay in the bucket."
}

func (c *ArtifactRmCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.ArtifactRemoved
	if err := g.Call(ctx, wire.SubjectArtifactRemove, wire.ArtifactRemoveRequest{CommandID: wire.NewCommandID(), Name: c.Name}, &r); err != nil {
		return err
	}
	if c.JSON {
		r.Digests, r.Deleted = cmdline.NonNil(r.Digests), cmdline.NonNil(r.Deleted)
		return text.JSON(out.Out, r)
	}
	kept := len(r.Digests) - len(r.Deleted)
	fmt.Fprintf(out.Out, "removed artifact %s (event %d): %d digest(s), %d deleted from the bus", c.Name, r.Seq, len(r.Digests), len(r.Deleted))
	if kept > 0 {
		fmt.Fprintf(out.Out, ", %d kept for another name", kept)
	}
	fmt.Fprintln(out.Out)
	return nil
}
