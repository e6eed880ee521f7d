package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Join is what an agent needs to join the mesh as one node: the mesh's name,
// where the bus is, the node's name, the controller key it pins, and, for a
// closed bus, the seed of the node's own identity there (which makes the
// join string a secret: whoever holds it hears what the node hears).
type Join struct {
	Mesh string `json:"mesh"`
	Bus  string `json:"bus"`
	Node string `json:"node"`
	Key  string `json:"key"`
	Seed string `json:"seed,omitempty"`
	// Token is an enrolment token ("ID.SECRET", issue 29): the agent makes
	// its own keys and enrols with them (Enrol), and from then on its node
	// seed is the one in its state, never one the controller could derive.
	Token string `json:"token,omitempty"`
	// CA is the PEM of the bus's certificate authority when the bus speaks
	// TLS (mesh up --tls): the agent trusts it and nothing else for this
	// bus, so the join string stays the one thing a machine is given.
	CA string `json:"ca,omitempty"`
	// beat is the MAC key of its liveness beats when it made its keys
	// (Enrol fills it): the controller cannot derive its report MAC key.
	beat string
	// own: the seed is one this machine made (Enrol), not one derived
	// from the controller key.
	own bool
}

// Options are the connection options of the node's identity: its nkey,
// its name as the user (the controller checks the key is that node's), and
// inboxes under its own prefix, the only replies a closed bus lets it read.
// Without a seed, none: an open bus asks nothing.
func (j Join) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if j.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(j.CA)) {
			return nil, errors.New("agent: the join string's CA is damaged; copy it again from mesh node join " + j.Node)
		}
		opts = append(opts, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if j.Seed == "" {
		return opts, nil
	}
	kp, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return nil, errors.New("agent: the join string's node seed is damaged; copy it again from mesh node join " + j.Node)
	}
	pub, _ := kp.PublicKey()
	return append(opts, nats.Nkey(pub, kp.Sign), nats.UserInfo(j.Node, ""), nats.CustomInboxPrefix(events.NodeInbox(j.Node))), nil
}

const joinPrefix = "meshjoin1."

// String is the join string mesh node enroll and mesh node join print.
func (j Join) String() string {
	b, _ := json.Marshal(j)
	return joinPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseJoin reads a join string and checks every part of it.
func ParseJoin(s string) (Join, error) {
	var j Join
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), joinPrefix)
	if !ok {
		return j, errors.New("agent: the join string does not start with " + joinPrefix + "; copy it whole from mesh node enroll or mesh node join")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || json.Unmarshal(b, &j) != nil {
		return j, errors.New("agent: the join string is damaged; copy it whole from mesh node join NAME")
	}
	// A token for any name names none: the agent is given its name.
	if j.Node != "" || j.Token == "" {
		if err := events.ValidateName("node", j.Node); err != nil {
			return j, fmt.Errorf("agent: the join string's %w", err)
		}
	}
	if !nkeys.IsValidPublicKey(j.Key) {
		return j, errors.New("agent: the join string's controller key is not a public key; copy it again from mesh node join NAME")
	}
	if j.Seed != "" {
		if _, err := j.Options(); err != nil {
			return j, err
		}
	}
	if j.Mesh == "" || j.Bus == "" {
		return j, errors.New("agent: the join string names no mesh or no bus; copy it again from mesh node join NAME")
	}
	return j, nil
}
