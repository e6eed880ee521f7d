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
	// OverlapUntil is the bound of the overlap the rotation opened (zero:
	// none): until Completed, the provider's ends are composed accepting
	// the previous generation too.
	OverlapUntil time.Time `json:"overlap_until,omitzero"`
	// Completed is the end of that overlap, once recorded.
	Completed *Completion `json:"completed,omitempty"`
}

// Completion is when an overlap ended, why, and the event that said so.
type Completion struct {
	At     time.Time               `json:"at"`
	Reason events.CompletionReason `json:"reason"`
	Seq    uint64                  `json:"seq"`
}

// Overlapping says whether the provider's ends accept the previous
// generation beside this one: composition reads it (compose.Input's
// Overlapping), so it must be the read models' alone, never the clock's.
func (r Rotation) Overlapping() bool { return !r.OverlapUntil.IsZero() && r.Completed == nil }

// foldCredentials keeps the last rotation of each pair, and the end of its
// overlap. A completion of another generation than the row's (a rotation
// landed after it was decided cannot, since both expect the provider's
// version, but a rebuild must not depend on that) is left aside.
func foldCredentials(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.CredentialRotated:
		return putJSON(b, pairKey(prefixCredential, ev.Provider, ev.Consumer),
			Rotation{Provider: ev.Provider, Consumer: ev.Consumer, Generation: ev.Generation, Ends: ev.Ends, At: rec.Envelope.OccurredAt, Seq: rec.Seq, OverlapUntil: ev.OverlapUntil})
	case events.RotationCompleted:
		var r Rotation
		found, err := getJSON(b, pairKey(prefixCredential, ev.Provider, ev.Consumer), &r)
		if err != nil || !found || r.Generation != ev.Generation {
			return err
		}
		r.Completed = &Completion{At: rec.Envelope.OccurredAt, Reason: ev.Reason, Seq: rec.Seq}
		return putJSON(b, pairKey(prefixCredential, ev.Provider, ev.Consumer), r)
	}
	return nil
}

// Rotations lists the last rotation of every pair ever rotated, by
// provider then consumer. A pair never rotated is at generation 0.
func (v *View) Rotations() ([]Rotation, error) { return decodeRows[Rotation](v.r, prefixCredential) }

// Rotation reads one pair's last rotation.
func (v *View) Rotation(provider, consumer string) (Rotation, bool, error) {
	return getOne[Rotation](v.r, pairKey(prefixCredential, provider, consumer))
}
