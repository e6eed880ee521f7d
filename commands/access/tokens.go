package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Enrolment tokens (issue 29): what the operator hands a machine instead of
// a key. The secret is made here, answered once to the command that asked,
// and recorded only as its sha256, so the log, a backup and the operator's
// home cannot enrol anything after the fact; a token is spent by use, by
// its expiry, or by mesh token revoke.

// The bounds of a token: a token that outlives its need is a standing key
// to the mesh, so it expires, by default within a day.
const (
	DefaultTokenExpiry = 24 * time.Hour
	MaxTokenExpiry     = 30 * 24 * time.Hour
	MaxTokenUses       = 100_000
)

// CreateToken records a new token and answers its secret.
func (h *Service) CreateToken(ctx context.Context, r wire.TokenRequest) (wire.TokenReply, error) {
	uses, expires := r.Uses, r.Expires
	if uses == 0 {
		uses = 1
	}
	if expires == 0 {
		expires = DefaultTokenExpiry
	}
	switch {
	case uses < 0 || uses > MaxTokenUses:
		return wire.TokenReply{}, aggregates.Refuse("make", "a token", aggregates.ErrInvalid, fmt.Sprintf("--uses %d is not between 1 and %d", r.Uses, MaxTokenUses))
	case expires < time.Minute || expires > MaxTokenExpiry:
		return wire.TokenReply{}, aggregates.Refuse("make", "a token", aggregates.ErrInvalid, fmt.Sprintf("--expires %s is not between 1m and %s", r.Expires, MaxTokenExpiry))
	case r.Node != "" && uses != 1:
		return wire.TokenReply{}, aggregates.Refuse("make", "a token", aggregates.ErrInvalid, "a token for one node's name has one use")
	case r.Rekey && r.Node == "":
		return wire.TokenReply{}, aggregates.Refuse("make", "a token", aggregates.ErrInvalid, "a re-key names the node it gives new keys")
	}
	// Labels and capabilities are validated as an enrolment validates them.
	probe, err := aggregates.NewNode("token").Decide(aggregates.EnrollNode{Name: "token", Capabilities: r.Capabilities, Labels: r.Labels}, h.Now())
	if err != nil {
		return wire.TokenReply{}, err
	}
	norm := probe[0].(events.NodeEnrolled)
	id, secret := newTokenSecret()
	ev := events.TokenCreated{ID: id, Hash: tokenHash(secret), Uses: uses, Expires: h.Now().Add(expires).UTC().Truncate(time.Second),
		Labels: norm.Labels, Capabilities: norm.Capabilities, Node: r.Node, Rekey: r.Rekey}
	seq, err := h.Store.Append(ctx, events.TokenAggregate(id), 0, r.CommandID, ev)
	if err != nil {
		return wire.TokenReply{}, err
	}
	if err := h.Landed(ctx, seq, ev); err != nil {
		return wire.TokenReply{}, err
	}
	h.Log.Info("enrolment token made", "token", id, "uses", uses, "expires", ev.Expires, "node", r.Node, "rekey", r.Rekey)
	return wire.TokenReply{Token: projections.Token{TokenCreated: ev, CreatedAt: h.Now(), Version: seq}, Seq: seq,
		Identity: wire.Identity{Mesh: h.Mesh, Node: r.Node, Key: h.PublicKey, Token: id + "." + secret}}, nil
}

// ListTokens answers every token.
func (h *Service) ListTokens(_ context.Context, _ wire.Empty) (wire.TokenList, error) {
	out := wire.TokenList{Mesh: h.Mesh, Key: h.PublicKey}
	err := h.Proj.Read(func(v *projections.View) (err error) {
		out.Tokens, err = v.Tokens()
		return err
	})
	if out.Tokens == nil {
		out.Tokens = []projections.Token{}
	}
	return out, err
}

// RevokeToken withdraws a token's unused uses; a spent or revoked token is
// nothing to do.
func (h *Service) RevokeToken(ctx context.Context, r wire.NameRequest) (wire.Changed, error) {
	var t projections.Token
	var found bool
	err := h.Proj.Read(func(v *projections.View) (err error) {
		t, found, err = v.Token(r.Name)
		return err
	})
	switch {
	case err != nil:
		return wire.Changed{}, err
	case !found:
		return wire.Changed{}, aggregates.Refuse("revoke", "token "+r.Name, aggregates.ErrInvalid, "no token of that id was made; see mesh token list")
	}
	if left, _ := t.Left(h.Now()); left == 0 {
		return wire.Changed{}, nil
	}
	seq, err := h.Store.Append(ctx, events.TokenAggregate(r.Name), t.Version, wire.NewCommandID(), events.TokenRevoked{ID: r.Name})
	if err != nil {
		return wire.Changed{}, err
	}
	return wire.Changed{Changed: true, Seq: seq}, h.Landed(ctx, seq, events.TokenRevoked{ID: r.Name})
}

// NodeToken makes a one-use token for node (enroll, join, rekey).
func (h *Service) NodeToken(ctx context.Context, node string, rekey bool) (wire.Identity, error) {
	r, err := h.CreateToken(ctx, wire.TokenRequest{CommandID: wire.NewCommandID(), Node: node, Rekey: rekey})
	return r.Identity, err
}

// Rekey makes a token that gives node new keys: its machine was wiped, or
// replaced, or it enrolled before nodes made their own keys. Until the
// token is used the node keeps its keys; once used, the old ones are
// refused at the bus and in the fold (recorded, and audit shows it).
func (h *Service) Rekey(ctx context.Context, r wire.NameRequest) (wire.Identity, error) {
	if err := h.ActiveNode(ctx, "re-key", r.Name); err != nil {
		return wire.Identity{}, err
	}
	return h.NodeToken(ctx, r.Name, true)
}

func newTokenSecret() (id, secret string) {
	var b [32]byte
	rand.Read(b[:])
	var i [6]byte
	rand.Read(i[:])
	return "t" + hex.EncodeToString(i[:]), base64.RawURLEncoding.EncodeToString(b[:])
}

func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// checkToken answers the token that the secret "ID.SECRET" is, usable now
// by node, or why not, in one sentence.
func checkToken(v *projections.View, given, node string, now time.Time) (projections.Token, error) {
	id, secret, ok := strings.Cut(given, ".")
	if !ok || id == "" || secret == "" {
		return projections.Token{}, fmt.Errorf("the join string's token is damaged; copy it whole from mesh token create or mesh node enroll")
	}
	t, found, err := v.Token(id)
	switch {
	case err != nil:
		return t, err
	case !found || subtle.ConstantTimeCompare([]byte(tokenHash(secret)), []byte(t.Hash)) != 1:
		return t, fmt.Errorf("token %s is not one this mesh made; ask the operator for a new one (mesh token create)", id)
	case t.Node != "" && t.Node != node:
		return t, fmt.Errorf("token %s enrols %s, not %s", id, t.Node, node)
	}
	if _, why := t.Left(now); why != "" {
		return t, fmt.Errorf("token %s cannot enrol %s: %s; ask the operator for a new one", id, node, why)
	}
	return t, nil
}

// tokenItems are the token's use and the node's keys, with its enrolment
// when it is new, as one atomic batch: the token's version is expected, so
// its last use goes to one machine only.
func (h *Service) tokenItems(v *projections.View, pool poolDecider, t projections.Token, keys events.NodeKeysRecorded) ([]store.One, error) {
	row, found, err := v.Node(keys.Node)
	if err != nil {
		return nil, err
	}
	had, owned, err := v.NodeKeys(keys.Node)
	if err != nil {
		return nil, err
	}
	var items []store.One
	switch {
	case found && row.Retired:
		return nil, fmt.Errorf("%s is retired; a retired node's name is never enrolled again", keys.Node)
	case found && owned && !t.Rekey:
		return nil, fmt.Errorf("%s is enrolled and has its keys; a new machine for it needs mesh node rekey %s", keys.Node, keys.Node)
	case !found && t.Rekey:
		return nil, fmt.Errorf("%s is not enrolled, so it cannot be re-keyed", keys.Node)
	case !found:
		enrol, err := pool(keys.Node, t)
		if err != nil {
			return nil, err
		}
		items = append(items, enrol...)
	}
	keys.Rekey = found && (owned || t.Rekey)
	// The keys live on an aggregate of their own (events.KeysAggregate), so
	// a new node's enrolment and its keys are one atomic batch (one event
	// an aggregate), and a re-key expects the keys it replaces.
	items = append(items,
		store.One{Aggregate: events.TokenAggregate(t.ID), Expected: t.Version, Event: events.TokenUsed{ID: t.ID, Node: keys.Node}},
		store.One{Aggregate: events.KeysAggregate(keys.Node), Expected: had.Seq, Event: keys})
	return items, nil
}

// poolDecider enrols a new node from a token: its enrolment and address.
type poolDecider func(node string, t projections.Token) ([]store.One, error)
