package aggregates

import (
	"slices"

	"github.com/meshctl/mesh/events"
)

// Artifact is an artifact name's consistency boundary (issue 32): the
// digests stored under it and not removed, the latest last.
type Artifact struct {
	Name    string
	Digests []string
	Version uint64
}

// StoreArtifact records that the bucket holds Digest's Size bytes under
// Name, put by By.
type StoreArtifact struct {
	Digest string
	Size   int64
	By     string
}

// RemoveArtifact removes the name and every digest stored under it.
// InUse, when not empty, is why it may not (a declaration in force names
// one of them), said by the caller, which reads the declarations.
type RemoveArtifact struct {
	By    string
	InUse string
}

// NewArtifact is the empty aggregate for name.
func NewArtifact(name string) *Artifact { return &Artifact{Name: name} }

// Apply folds one of the artifact's events.
func (a *Artifact) Apply(rec events.Recorded) {
	switch ev := rec.Event.(type) {
	case events.ArtifactStored:
		a.Digests = append(slices.DeleteFunc(a.Digests, func(d string) bool { return d == ev.Digest }), ev.Digest)
	case events.ArtifactRemoved:
		a.Digests = slices.DeleteFunc(a.Digests, func(d string) bool { return slices.Contains(ev.Digests, d) })
	}
	a.Version = rec.Seq
}

// Latest is the digest the name stands for now ("" for none).
func (a *Artifact) Latest() string {
	if len(a.Digests) == 0 {
		return ""
	}
	return a.Digests[len(a.Digests)-1]
}

// DecideStore answers the put, or nothing when the name stands for these
// bytes already.
func (a *Artifact) DecideStore(cmd StoreArtifact) ([]events.Event, error) {
	if a.Latest() == cmd.Digest {
		return nil, nil
	}
	return []events.Event{events.ArtifactStored{Name: a.Name, Digest: cmd.Digest, Size: cmd.Size, By: cmd.By}}, nil
}

// DecideRemove answers the removal: refused for a name that stands for
// nothing, and while a declaration in force uses it.
func (a *Artifact) DecideRemove(cmd RemoveArtifact) ([]events.Event, error) {
	if len(a.Digests) == 0 {
		return nil, refuse("remove artifact", a.Name, ErrUnknown, "no artifact is stored under that name (mesh artifact list names them)")
	}
	if cmd.InUse != "" {
		return nil, refuse("remove artifact", a.Name, ErrInUse, "%s", cmd.InUse)
	}
	return []events.Event{events.ArtifactRemoved{Name: a.Name, Digests: slices.Clone(a.Digests), By: cmd.By}}, nil
}
