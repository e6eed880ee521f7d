package aggregates

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
)

// Node is one machine's consistency boundary: its name's uniqueness, its
// enrolment and retirement (and, later, its assignments and declarations).
type Node struct {
	Name         string
	Enrolled     bool
	EnrolledAt   time.Time
	Retired      bool
	Capabilities []string
	Labels       map[string]string
	// Assignments are the modules the node is to hold, by module name.
	Assignments map[string]Assignment
	// Version is the stream sequence of the last event applied: the
	// expectation of the next append. A send is numbered and chained from
	// the nodes read model's row (commands' seal), appended expecting the
	// row's version: right only while every event of a node's aggregate
	// moves that version, which the fold does and
	// projections.TestEveryNodeEventMovesItsVersion holds it to.
	Version uint64
}

// NewNode is the empty aggregate for name, before any of its events.
func NewNode(name string) *Node { return &Node{Name: name, Assignments: map[string]Assignment{}} }

// Assignment is one module on a node: the build and the settings the
// operator gave (defaults are the build's business).
type Assignment struct {
	Build    string
	Settings map[string]string
	Policy   events.Policy // as recorded: "" before policies (manual)
}

// Commands on a node.
type (
	EnrollNode struct {
		Name         string
		Capabilities []string
		Labels       map[string]string
	}
	RetireNode struct {
		Name string
	}
	// ChangeNode replaces a node's declared capabilities (when
	// Capabilities is not nil) and labels (when Labels is not nil).
	ChangeNode struct {
		Name         string
		Capabilities []string
		Labels       map[string]string
	}
)

// Apply folds one of the node's own events into its state.
func (n *Node) Apply(rec events.Recorded) {
	switch ev := rec.Event.(type) {
	case events.NodeEnrolled:
		n.Enrolled, n.EnrolledAt = true, rec.Envelope.OccurredAt
		n.Capabilities, n.Labels = ev.Capabilities, ev.Labels
	case events.NodeRetired:
		n.Retired = true
	case events.NodeChanged:
		n.Capabilities, n.Labels = ev.Capabilities, ev.Labels
	case events.ModuleAssigned:
		n.Assignments[ev.Module] = Assignment{Build: ev.Build, Settings: ev.Settings, Policy: ev.Policy}
	case events.ModuleUnassigned:
		delete(n.Assignments, ev.Module)
	}
	n.Version = rec.Seq
}

// Decide answers the events cmd causes, none when it is already satisfied,
// or a refusal.
func (n *Node) Decide(cmd any, now time.Time) ([]events.Event, error) {
	switch c := cmd.(type) {
	case EnrollNode:
		return n.enroll(c)
	case RetireNode:
		return n.retire(c, now)
	case ChangeNode:
		return n.change(c)
	case AssignModule:
		return n.assign(c)
	case UnassignModule:
		return n.unassign(c)
	}
	return nil, fmt.Errorf("aggregates: a node cannot decide %T", cmd)
}

func (n *Node) enroll(c EnrollNode) ([]events.Event, error) {
	if err := events.ValidateName("node", c.Name); err != nil {
		return nil, &Error{Op: "enroll", ID: c.Name, Err: ErrInvalid, Detail: strings.TrimPrefix(err.Error(), "node name ")}
	}
	if c.Name == events.ServiceAny {
		// mesh.svc.R.any is every provider's: a node of that name would
		// have its endpoints served by providers on other machines.
		return nil, &Error{Op: "enroll", ID: c.Name, Err: ErrInvalid, Detail: fmt.Sprintf("%q is reserved (a service subject's token for any provider); choose another name", c.Name)}
	}
	if n.Enrolled {
		// Retired names stay taken: history must never hold two machines under one name.
		state := "enrolled"
		if n.Retired {
			state = "retired"
		}
		return nil, refuse("enroll", c.Name, ErrNameTaken, "the name is taken (a node of that name was %s on %s); choose another name",
			state, n.EnrolledAt.UTC().Format(time.RFC3339))
	}
	caps, err := capabilities(c.Name, c.Capabilities)
	if err != nil {
		return nil, err
	}
	labels, err := labels(c.Name, c.Labels)
	if err != nil {
		return nil, err
	}
	return []events.Event{events.NodeEnrolled{Name: c.Name, Capabilities: caps, Labels: labels}}, nil
}

func (n *Node) retire(c RetireNode, now time.Time) ([]events.Event, error) {
	if !n.Enrolled {
		return nil, refuse("retire", c.Name, ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
	}
	if n.Retired {
		return nil, nil
	}
	return []events.Event{events.NodeRetired{Name: c.Name, RetiredAt: now.UTC()}}, nil
}

// change replaces what the node is declared to have, or answers nothing
// when it has that already.
func (n *Node) change(c ChangeNode) ([]events.Event, error) {
	switch {
	case !n.Enrolled:
		return nil, refuse("change", c.Name, ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
	case n.Retired:
		return nil, refuse("change", c.Name, ErrRetired, "it is retired; a retired node's record stays as it was")
	}
	ev := events.NodeChanged{Name: c.Name, Capabilities: n.Capabilities, Labels: n.Labels}
	var err error
	if c.Capabilities != nil {
		if ev.Capabilities, err = capabilities(c.Name, c.Capabilities); err != nil {
			return nil, err
		}
	}
	if c.Labels != nil {
		if ev.Labels, err = labels(c.Name, c.Labels); err != nil {
			return nil, err
		}
	}
	if slices.Equal(ev.Capabilities, n.Capabilities) && maps.Equal(ev.Labels, n.Labels) {
		return nil, nil
	}
	return []events.Event{ev}, nil
}

// capabilities are sorted and unique, so two enrolments that say the same
// thing record the same bytes.
func capabilities(node string, in []string) ([]string, error) {
	out := []string{}
	for _, c := range in {
		if err := events.ValidateName("capability", c); err != nil {
			return nil, &Error{Op: "enroll", ID: node, Err: ErrInvalid, Detail: err.Error()}
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func labels(node string, in map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range in {
		if err := events.ValidateLabelKey(k); err != nil {
			return nil, &Error{Op: "enroll", ID: node, Err: ErrInvalid, Detail: err.Error()}
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) || len(v) > 256 {
			return nil, refuse("enroll", node, ErrInvalid, "label %s has a value with control characters or over 256 bytes", k)
		}
		out[k] = v
	}
	return out, nil
}
