package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// Standing is one provider on one machine failing one consumer: the newest
// word, since when it has been failing, and when the word last changed. It
// stays until a recovery for the same triple.
type Standing struct {
	Provider string    `json:"provider"`
	Machine  string    `json:"machine"`
	Consumer string    `json:"consumer"`
	Word     string    `json:"word"`
	Since    time.Time `json:"since"`
	Updated  time.Time `json:"updated"`
	Seq      uint64    `json:"seq"`
}

func standingKey(provider, machine, consumer string) []byte {
	return append(pairKey(prefixStanding, provider, machine), append([]byte{sep}, consumer...)...)
}

// foldStandings keeps the newest failing word per (provider, machine,
// consumer) until that triple recovers. A recovery of nothing is nothing.
func foldStandings(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.ProviderFailing:
		key := standingKey(ev.Provider, ev.Machine, ev.Consumer)
		var s Standing
		found, err := getJSON(b, key, &s)
		if err != nil {
			return err
		}
		if !found {
			s = Standing{Provider: ev.Provider, Machine: ev.Machine, Consumer: ev.Consumer, Since: rec.Envelope.OccurredAt}
		}
		s.Word, s.Updated, s.Seq = ev.Word, rec.Envelope.OccurredAt, rec.Seq
		return putJSON(b, key, s)
	case events.ProviderRecovered:
		return b.Delete(standingKey(ev.Provider, ev.Machine, ev.Consumer), nil)
	}
	return nil
}

// Standings lists every provider failing a consumer, by provider, machine,
// consumer; none on a retired machine. A retired node's word holds nothing:
// nobody can clear it (mesh report recovered refuses a retired node), and
// one its connection wrote after the retirement would otherwise hold
// rollouts of its module for ever.
func (v *View) Standings() ([]Standing, error) {
	all, err := decodeRows[Standing](v.r, prefixStanding)
	if err != nil {
		return nil, err
	}
	retired := map[string]bool{}
	kept := all[:0]
	for _, s := range all {
		gone, seen := retired[s.Machine]
		if !seen {
			n, found, err := v.Node(s.Machine)
			if err != nil {
				return nil, err
			}
			gone = found && n.Retired
			retired[s.Machine] = gone
		}
		if !gone {
			kept = append(kept, s)
		}
	}
	return kept, nil
}
