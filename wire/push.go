package wire

import (
	"github.com/meshctl/mesh/compose"
)

// PushPlanReply is what a push would do now (push --dry-run): the
// mesh-wide plan. Nothing is sent or recorded.
type PushPlanReply struct {
	Considered int           `json:"considered"`
	WouldSend  []PlannedNode `json:"would_send"`
	Unsent     []UnsentNode  `json:"unsent"`
	// Detailed is how many nodes' changes were read (the first
	// maxPlanned that change); the others are counted.
	Detailed int `json:"detailed"`
	// Held: as PushReply's, the nodes the push would leave out.
	Held []UnsentNode `json:"held,omitempty"`
}

// PlannedNode is one node a push would send to, and how what it would be
// sent differs from what it was sent (nil Changes: not read, see
// PushPlanReply.Detailed).
type PlannedNode struct {
	Node string `json:"node"`
	// Same: it would be sent the content it was sent (again, as push
	// does to a node that is not current).
	Same    bool             `json:"same"`
	Changes []compose.Change `json:"changes,omitempty"`
	Note    string           `json:"note,omitempty"`
}
