package commands

import (
	"time"

	"github.com/meshctl/mesh/projections"
)

// The wire: one subject per verb under APIPrefix, JSON both ways. These types
// are the stable schema of the controller's answers and of `--json` output.
const (
	ServiceName    = "mesh-controller"
	ServiceVersion = "0.1.0"
	APIPrefix      = "mesh.api"

	SubjectNodeEnroll         = APIPrefix + ".node.enroll"
	SubjectNodeRetire         = APIPrefix + ".node.retire"
	SubjectNodeList           = APIPrefix + ".node.list"
	SubjectNodeShow           = APIPrefix + ".node.show"
	SubjectProjectionsStatus  = APIPrefix + ".projections.status"
	SubjectProjectionsRebuild = APIPrefix + ".projections.rebuild"
)

// EnrollRequest asks for a node to join the mesh. CommandID makes a retry of
// the same request idempotent; the client makes one per invocation.
type EnrollRequest struct {
	CommandID    string            `json:"command_id"`
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
}

// RetireRequest asks for a node to leave the mesh.
type RetireRequest struct {
	CommandID string `json:"command_id"`
	Name      string `json:"name"`
}

// NameRequest names one node.
type NameRequest struct {
	Name string `json:"name"`
}

// Empty is a request with nothing in it.
type Empty struct{}

// Changed answers a command: what it appended (Seq 0 and Changed false when
// there was nothing to do) and the node as the read models now hold it.
type Changed struct {
	Changed bool     `json:"changed"`
	Seq     uint64   `json:"seq"`
	Node    NodeView `json:"node"`
}

// NodeView is a node as `node list --json` and `node show --json` print it.
type NodeView struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
	Retired      bool              `json:"retired"`
	EnrolledAt   time.Time         `json:"enrolled_at"`
	RetiredAt    *time.Time        `json:"retired_at,omitempty"`
	EnrolledSeq  uint64            `json:"enrolled_seq"`
	Version      uint64            `json:"version"`
}

// NodeList is every node, retired ones included.
type NodeList struct {
	Nodes []NodeView `json:"nodes"`
}

// RebuildReply says what a rebuild did.
type RebuildReply struct {
	From       string  `json:"from"`
	To         string  `json:"to"`
	Events     uint64  `json:"events"`
	Checkpoint uint64  `json:"checkpoint"`
	Seconds    float64 `json:"seconds"`
}

// StatusReply is projections.Status on the wire.
type StatusReply = projections.Status

func viewOf(n projections.Node) NodeView {
	v := NodeView{
		Name: n.Name, Capabilities: n.Capabilities, Labels: n.Labels, Retired: n.Retired,
		EnrolledAt: n.EnrolledAt, EnrolledSeq: n.EnrolledSeq, Version: n.Version,
	}
	if v.Capabilities == nil {
		v.Capabilities = []string{}
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if !n.RetiredAt.IsZero() {
		at := n.RetiredAt
		v.RetiredAt = &at
	}
	return v
}
