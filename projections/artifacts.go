package projections

import (
	"encoding/json"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// ArtifactRow is an artifact name's row (issue 32).
type ArtifactRow = wire.ArtifactRow

// ArtifactObject is a digest's row: its size and the names that hold it.
// Composition reads these (an artifact resource carries its digest and
// size), and a removal deletes an object only once no name holds it.
type ArtifactObject struct {
	Size  int64    `json:"size"`
	Names []string `json:"names"`
}

func artifactKey(name string) []byte { return append([]byte{prefixArtifact}, name...) }

func artifactObjectKey(digest string) []byte { return append([]byte{prefixArtifactObject}, digest...) }

// foldArtifacts keeps each artifact name's row and each digest's.
func foldArtifacts(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.ArtifactStored:
		var row ArtifactRow
		if _, err := getJSON(b, artifactKey(ev.Name), &row); err != nil {
			return err
		}
		at := rec.Envelope.OccurredAt
		row.Name, row.Digest, row.Size, row.By, row.StoredAt, row.Seq, row.Version = ev.Name, ev.Digest, ev.Size, ev.By, at, rec.Seq, rec.Seq
		row.Versions = slices.DeleteFunc(row.Versions, func(v wire.ArtifactVersion) bool { return v.Digest == ev.Digest })
		row.Versions = append(row.Versions, wire.ArtifactVersion{Digest: ev.Digest, Size: ev.Size, By: ev.By, StoredAt: at, Seq: rec.Seq})
		if err := putJSON(b, artifactKey(ev.Name), row); err != nil {
			return err
		}
		return holdObject(b, ev.Digest, ev.Size, ev.Name, true)
	case events.ArtifactRemoved:
		var row ArtifactRow
		found, err := getJSON(b, artifactKey(ev.Name), &row)
		if err != nil {
			return err
		}
		for _, d := range ev.Digests {
			if err := holdObject(b, d, 0, ev.Name, false); err != nil {
				return err
			}
		}
		if !found {
			return nil
		}
		row.Versions = slices.DeleteFunc(row.Versions, func(v wire.ArtifactVersion) bool { return slices.Contains(ev.Digests, v.Digest) })
		if len(row.Versions) == 0 {
			// The name stands for nothing: it is gone from the list, and a
			// put under it starts afresh (its aggregate's version is in
			// the log, which Decide reads).
			return b.Delete(artifactKey(ev.Name), nil)
		}
		last := row.Versions[len(row.Versions)-1]
		row.Digest, row.Size, row.By, row.StoredAt, row.Seq, row.Version = last.Digest, last.Size, last.By, last.StoredAt, last.Seq, rec.Seq
		return putJSON(b, artifactKey(ev.Name), row)
	}
	return nil
}

// holdObject adds name to digest's holders (hold) or takes it away; a
// digest no name holds has no row.
func holdObject(b *pebble.Batch, digest string, size int64, name string, hold bool) error {
	var o ArtifactObject
	if _, err := getJSON(b, artifactObjectKey(digest), &o); err != nil {
		return err
	}
	o.Names = slices.DeleteFunc(o.Names, func(n string) bool { return n == name })
	if hold {
		o.Size = size
		o.Names = append(o.Names, name)
		slices.Sort(o.Names)
	}
	if len(o.Names) == 0 {
		return b.Delete(artifactObjectKey(digest), nil)
	}
	return putJSON(b, artifactObjectKey(digest), o)
}

// Artifacts lists every artifact name that stands for bytes, by name.
func (v *View) Artifacts() ([]ArtifactRow, error) {
	return decodeRows[ArtifactRow](v.r, prefixArtifact)
}

// Artifact reads one artifact name's row.
func (v *View) Artifact(name string) (ArtifactRow, bool, error) {
	return getOne[ArtifactRow](v.r, artifactKey(name))
}

// ArtifactObject reads what the log says the bucket holds under digest.
func (v *View) ArtifactObject(digest string) (ArtifactObject, bool, error) {
	return getOne[ArtifactObject](v.r, artifactObjectKey(digest))
}

// ArtifactSizes is every digest the bucket holds by the log, with its
// size: composition's input.
func (v *View) ArtifactSizes() (map[string]int64, error) {
	type sized struct {
		digest string
		size   int64
	}
	// scanRows decodes on several goroutines: each row on its own, the
	// map filled after.
	rows, err := scanRows(v.r, []byte{prefixArtifactObject}, func(k, val []byte) (sized, error) {
		var o ArtifactObject
		err := json.Unmarshal(val, &o)
		return sized{string(k[1:]), o.Size}, err
	})
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.digest] = r.size
	}
	return out, err
}
