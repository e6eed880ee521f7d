package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// ModuleRegistered: a build of a module entered the catalogue. Manifest holds
// the manifest's canonical bytes themselves, so the build (their sha256) can
// be checked by anyone reading the log.
type ModuleRegistered struct {
	Module   string          `json:"module"`
	Build    string          `json:"build"`
	Manifest json.RawMessage `json:"manifest"`
}

// ModuleAssigned: a node is to hold a build of a module, with these settings
// (only those the operator set; defaults come from the build's manifest),
// under an upgrade policy. Assigning again with another build, other
// settings or another policy replaces the assignment.
type ModuleAssigned struct {
	Node     string            `json:"node"`
	Module   string            `json:"module"`
	Build    string            `json:"build"`
	Settings map[string]string `json:"settings"`
	// Policy: what a newer build of the module does to this assignment.
	// Absent in events from before policies, which read as PolicyManual:
	// then too a new build waited for the operator.
	Policy Policy `json:"policy,omitempty"`
}

// Policy is an assignment's upgrade policy (rule 23): what a newer build
// of its module registered does to it.
type Policy string

const (
	// PolicyPinned: it stays on its build until assigned again; no
	// rollout moves it.
	PolicyPinned Policy = "pinned"
	// PolicyManual: a newer build waits for a rollout (or an assign).
	PolicyManual Policy = "manual"
	// PolicyAuto: a newer build registered starts the module's rollout by
	// itself, over the nodes whose policy is auto.
	PolicyAuto Policy = "auto"
)

// Policies are every policy, in the order help lists them.
var Policies = []Policy{PolicyPinned, PolicyManual, PolicyAuto}

// Or is the policy, or PolicyManual when none was recorded.
func (p Policy) Or() Policy {
	if p == "" {
		return PolicyManual
	}
	return p
}

// ParsePolicy reads a policy as an operator gives it ("" is none given).
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	if s == "" {
		return "", nil
	}
	return "", fmt.Errorf("policy %q is not pinned, manual or auto", s)
}

// ModuleUnassigned: the node is no longer to hold the module.
type ModuleUnassigned struct {
	Node   string `json:"node"`
	Module string `json:"module"`
}

func (ModuleRegistered) EventType() string { return "ModuleRegistered" }
func (ModuleAssigned) EventType() string   { return "ModuleAssigned" }
func (ModuleUnassigned) EventType() string { return "ModuleUnassigned" }

// CredentialRotated: the credentials Provider mints for Consumer moved to
// Generation (rule 7). It lands in one atomic batch with a declaration for
// every node in Ends (each node holding either end, by name) or not at
// all, so no node is ever sent a credential the other end was not.
//
// OverlapUntil, when set, opens an overlap: the provider's ends accept the
// previous generation beside this one for the consumer, so a consumer end
// whose machine is away is not locked out, until RotationCompleted closes
// it (every consumer end applied, or this bound passed). Zero (a rotation
// recorded before overlaps, or --overlap 0): no overlap, the old
// credential is dropped at once.
type CredentialRotated struct {
	Provider     string    `json:"provider"`
	Consumer     string    `json:"consumer"`
	Generation   uint64    `json:"generation"`
	Ends         []string  `json:"ends"`
	OverlapUntil time.Time `json:"overlap_until,omitzero"`
}

// RotationCompleted: the overlap that the rotation of the pair to
// Generation opened is over, for Reason, and the provider's ends in
// ProviderEnds were sent, in the same atomic batch, declarations without
// the previous generation's credential (rule 7).
type RotationCompleted struct {
	Provider     string           `json:"provider"`
	Consumer     string           `json:"consumer"`
	Generation   uint64           `json:"generation"`
	Reason       CompletionReason `json:"reason"`
	ProviderEnds []string         `json:"provider_ends"`
}

// CompletionReason is why an overlap ended.
type CompletionReason string

const (
	// CompletedApplied: every consumer end applied a declaration sent
	// with the new generation or after.
	CompletedApplied CompletionReason = "applied"
	// CompletedBoundPassed: the overlap's bound passed first; a consumer
	// end still on the old credential is refused until it applies.
	CompletedBoundPassed CompletionReason = "bound passed"
)

// SecretForgotten: the salts of these versions of a secret setting were
// deleted from the secrets bucket, so no one can open them again from the
// log or a backup taken after (rule 21). The sealed values stay in the log,
// unreadable; an assignment whose current value was forgotten cannot be
// composed until the setting is given again.
type SecretForgotten struct {
	Node     string `json:"node"`
	Module   string `json:"module"`
	Setting  string `json:"setting"`
	Versions []int  `json:"versions"`
}

func (CredentialRotated) EventType() string { return "CredentialRotated" }
func (RotationCompleted) EventType() string { return "RotationCompleted" }
func (SecretForgotten) EventType() string   { return "SecretForgotten" }
