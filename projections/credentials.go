package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Rotation is the last rotation of the credentials one provider module
// mints for one consumer module (rule 7): the generation composition mints
// them at, and the nodes the rotation was sent to together, which status
// follows until each reports applying it.
type Rotation struct {
	Provider   string    `json:"provider"`
	Consumer   string    `json:"consumer"`
	Generation uint64    `json:"generation"`
	Ends       []string  `json:"ends"`
	At         time.Time `json:"at"`
	Seq        uint64    `json:"seq"`
}

// foldCredentials keeps the last rotation of each pair.
func foldCredentials(b *pebble.Batch, rec events.Recorded) error {
	ev, ok := rec.Event.(events.CredentialRotated)
	if !ok {
		return nil
	}
	return putJSON(b, pairKey(prefixCredential, ev.Provider, ev.Consumer),
		Rotation{Provider: ev.Provider, Consumer: ev.Consumer, Generation: ev.Generation, Ends: ev.Ends, At: rec.Envelope.OccurredAt, Seq: rec.Seq})
}

// Rotations lists the last rotation of every pair ever rotated, by
// provider then consumer. A pair never rotated is at generation 0.
func (v *View) Rotations() ([]Rotation, error) { return decodeRows[Rotation](v.r, prefixCredential) }

// Rotation reads one pair's last rotation.
func (v *View) Rotation(provider, consumer string) (Rotation, bool, error) {
	var r Rotation
	found, err := getJSON(v.r, pairKey(prefixCredential, provider, consumer), &r)
	return r, found, err
}
