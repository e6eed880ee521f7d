package projections

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
)

// NodeKeys are the public keys a node's agent made on its own machine and
// enrolled with (issue 29): a row only for such nodes. A node enrolled
// before has none, and its keys are derived from the controller key as
// they always were (declaration/keys.go), until it is re-keyed.
type NodeKeys struct {
	Node    string    `json:"node"`
	Bus     string    `json:"bus"`
	Report  string    `json:"report"`
	Seal    string    `json:"seal"`
	Overlay string    `json:"overlay"`
	Token   string    `json:"token"`
	Seq     uint64    `json:"seq"`    // the event that recorded them
	At      time.Time `json:"at"`     // when
	Rekeys  int       `json:"rekeys"` // how many times an operator gave it new keys
}

func nodeKeysKey(node string) []byte { return append([]byte{prefixNodeKeys}, node...) }
func tokenKey(id string) []byte      { return append([]byte{prefixToken}, id...) }

// foldTokens keeps each token and what was used of it.
func foldTokens(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.TokenCreated:
		return putJSON(b, tokenKey(ev.ID), Token{TokenCreated: ev, CreatedAt: rec.Envelope.OccurredAt, Version: rec.Seq})
	// Each event moves the token's version: its next use, and a revoke,
	// expect it. Left at its creation, the second use of a many-use token
	// was refused for ever as "changed by other writes".
	case events.TokenUsed:
		return bumpJSON(b, tokenKey(ev.ID), func(t *Token) { t.Used, t.Version = append(t.Used, ev.Node), rec.Seq })
	case events.TokenRevoked:
		return bumpJSON(b, tokenKey(ev.ID), func(t *Token) { t.Revoked, t.Version = true, rec.Seq })
	}
	return nil
}

// foldNodeKeys records a node's own keys, and its report key in force with
// them: the report key row is what every report is held to.
func (f *folder) foldNodeKeys(rec events.Recorded) error {
	ev, ok := rec.Event.(events.NodeKeysRecorded)
	if !ok {
		return nil
	}
	k, _, err := f.ownKeys(ev.Node)
	if err != nil {
		return err
	}
	rekeys := k.Rekeys
	if ev.Rekey {
		rekeys++
	}
	row := NodeKeys{Node: ev.Node, Bus: ev.Bus, Report: ev.Report, Seal: ev.Seal, Overlay: ev.Overlay, Token: ev.Token,
		Seq: rec.Seq, At: rec.Envelope.OccurredAt, Rekeys: rekeys}
	f.owned[ev.Node] = &row
	f.reportKeys[ev.Node] = ev.Report
	if err := f.b.Set(reportKeyKey(ev.Node), []byte(ev.Report), nil); err != nil {
		return err
	}
	return putJSON(f.b, nodeKeysKey(ev.Node), row)
}

// ownKeys are node's own keys, if it made them (found false: it did not).
func (f *folder) ownKeys(node string) (NodeKeys, bool, error) {
	if k, ok := f.owned[node]; ok {
		if k == nil {
			return NodeKeys{}, false, nil
		}
		return *k, true, nil
	}
	var k NodeKeys
	found, err := getJSON(f.b, nodeKeysKey(node), &k)
	if err != nil {
		return k, false, err
	}
	if found {
		f.owned[node] = &k
	} else {
		f.owned[node] = nil
	}
	return k, found, nil
}

// NodeKeys reads node's own keys (found false: it enrolled before nodes
// made their keys, and its keys derive from the controller's).
func (v *View) NodeKeys(node string) (NodeKeys, bool, error) {
	return getOne[NodeKeys](v.r, nodeKeysKey(node))
}

// AllNodeKeys lists every node that made its own keys, by name.
func (v *View) AllNodeKeys() (map[string]NodeKeys, error) {
	rows, err := decodeRows[NodeKeys](v.r, prefixNodeKeys)
	out := make(map[string]NodeKeys, len(rows))
	for _, r := range rows {
		out[r.Node] = r
	}
	return out, err
}

// Token reads one token.
func (v *View) Token(id string) (Token, bool, error) {
	return getOne[Token](v.r, tokenKey(id))
}

// Tokens lists every token, by id.
func (v *View) Tokens() ([]Token, error) { return decodeRows[Token](v.r, prefixToken) }
