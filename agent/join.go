package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nkeys"
)

// Join is what an agent needs to join the mesh as one node: the mesh's name,
// where the bus is, the node's name, and the controller key it pins.
type Join struct {
	Mesh string `json:"mesh"`
	Bus  string `json:"bus"`
	Node string `json:"node"`
	Key  string `json:"key"`
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
	if err := events.ValidateName("node", j.Node); err != nil {
		return j, fmt.Errorf("agent: the join string's %w", err)
	}
	if !nkeys.IsValidPublicKey(j.Key) {
		return j, errors.New("agent: the join string's controller key is not a public key; copy it again from mesh node join NAME")
	}
	if j.Mesh == "" || j.Bus == "" {
		return j, errors.New("agent: the join string names no mesh or no bus; copy it again from mesh node join NAME")
	}
	return j, nil
}
