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
