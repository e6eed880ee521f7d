package compose

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Sealed is a rendered file's content that holds a secret, as a
// declaration carries it (rule 21): Box, the content sealed to the node (only
// its agent can open it), and MAC, a digest of the clear content keyed by
// the controller, which says that the content changed without letting
// anyone who reads the log test a guess of it. The content digest (rule 4)
// covers the MAC and not the box, which is new at every seal.
//
// Keys, when the file printed secret settings, are the ids of their salts:
// the box then holds the content sealed once more, under a key made of
// those salts (secret.ContentKey), which the agent asks the controller for
// at apply and keeps only in memory. Erasing a salt (mesh secret forget)
// is then the end of that key, so nothing opens the file from the log
// again, the node's own key included (issue 29, point 6).
type Sealed struct {
	MAC  string   `json:"mac"`
	Box  string   `json:"box,omitempty"`
	Keys []string `json:"keys,omitempty"`
}

// Secrets seals and mints for composition. Composition without it composes
// no secret: a node whose files would hold one cannot be composed, and
// says so.
type Secrets interface {
	// Seal seals content for the file at path on node; salts are the ids
	// of the salts of the secret settings it printed, sorted (none when it
	// printed only minted credentials or the overlay key).
	Seal(node, path, content string, salts []string) (Sealed, error)
	// Mint is the credential of one consumer of one provider.
	Mint(c CredentialRef) string
	// OverlayKey is node's private overlay key (what its agent derives
	// from its join string), for a file that configures the overlay.
	OverlayKey(node string) string
}

// CredentialRef names one minted credential: one provider module on its
// node, one requirement it provisions, one consumer module on its node,
// and the generation the last rotation of that pair moved it to.
type CredentialRef struct {
	Mesh                   string
	ProviderNode, Provider string
	Requirement            string
	ConsumerNode, Consumer string
	Generation             uint64
}

// Pair is a provider module and a consumer module: what mesh rotate moves
// to a new generation.
type Pair struct{ Provider, Consumer string }

// Credential is what a template reads of a minted credential: a user name
// derived from the consumer, and the password, a secret.
type Credential struct {
	User     string
	Password *Secret
}

// ConsumerCredential is one consumer a provider serves, with its
// credential: what a provider's templates range over as .Consumers.
// Previous is the credential of the generation before, during the overlap
// a rotation opened (nil outside one): a template that lists it too lets
// a consumer end that has not applied the rotation yet still in.
type ConsumerCredential struct {
	Node, Module, Requirement string
	Credential
	Previous *Credential
}

// Secret is a secret value as a template sees it. Printing it (the only
// way a template can put it into a file) marks the file being rendered as
// holding a secret, so the file is sealed however the template wrote it:
// as it is, quoted, in hex or through printf.
type Secret struct {
	value string
	salt  string // the id of its salt, for a secret setting; "" otherwise
	by    *sealer
}

// String is the value, and marks the file being rendered.
func (s *Secret) String() string {
	s.by.read = true
	if s.salt != "" {
		s.by.salts[s.salt] = true
	}
	return s.value
}

// User is the user name of a consumer's credential: its module and node,
// in the letters, digits and '_' a database or a token issuer takes.
func User(module, node string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, module+"_"+node)
}

// sealer renders one node's files, knowing whether each read a secret,
// and the salts of the secret settings it read.
type sealer struct {
	secrets Secrets
	read    bool
	salts   map[string]bool
}

func (s *sealer) secret(v string) *Secret { return &Secret{value: v, by: s} }

// setting is a secret setting's value, sealed in the log under salt.
func (s *sealer) setting(v, salt string) *Secret { return &Secret{value: v, salt: salt, by: s} }

// begin starts a file: nothing read yet.
func (s *sealer) begin() {
	s.read = false
	clear(s.salts)
}

// seal turns a rendered file that read a secret into sealed content.
func (s *sealer) seal(node string, r *Resource) error {
	if !s.read {
		return nil
	}
	if s.secrets == nil {
		return fmt.Errorf("%s holds a secret and this composition cannot seal it", r.Path)
	}
	salts := slices.Sorted(maps.Keys(s.salts))
	sealed, err := s.secrets.Seal(node, r.Path, *r.Content, salts)
	if err != nil {
		return fmt.Errorf("%s holds a secret that cannot be sealed: %w", r.Path, err)
	}
	r.Content, r.Sealed = nil, &sealed
	return nil
}
