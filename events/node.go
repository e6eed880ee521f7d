package events

import "time"

// NodeEnrolled: a machine joined the mesh under Name. The first event of a
// node aggregate; its existence is what makes the name taken, for ever.
type NodeEnrolled struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
}

// NodeRetired: the node left the mesh. It can no longer be assigned to or
// pushed to, and its name stays taken so history never becomes ambiguous.
type NodeRetired struct {
	Name      string    `json:"name"`
	RetiredAt time.Time `json:"retired_at"`
}

func (NodeEnrolled) EventType() string { return "NodeEnrolled" }
func (NodeRetired) EventType() string  { return "NodeRetired" }

// NodeChanged: the operator changed what a node is declared to have: its
// capabilities and labels, each replaced whole by what is here.
type NodeChanged struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
}

// NodeFactsReported: what a node's agent detected of its machine (a
// report, signed): its operating system, architecture and the rest of
// the documented detectors (agent/facts.go). Capabilities are those the
// facts give it (its OS, its architecture, systemd), beside the
// operator's declared ones.
type NodeFactsReported struct {
	Node         string            `json:"node"`
	Facts        map[string]string `json:"facts"`
	Capabilities []string          `json:"capabilities"`
}

func (NodeChanged) EventType() string       { return "NodeChanged" }
func (NodeFactsReported) EventType() string { return "NodeFactsReported" }
