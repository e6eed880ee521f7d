package events

import "encoding/json"

// ModuleRegistered: a build of a module entered the catalogue. Manifest holds
// the manifest's canonical bytes themselves, so the build (their sha256) can
// be checked by anyone reading the log.
type ModuleRegistered struct {
	Module   string          `json:"module"`
	Build    string          `json:"build"`
	Manifest json.RawMessage `json:"manifest"`
}

// ModuleAssigned: a node is to hold a build of a module, with these settings
// (only those the operator set; defaults come from the build's manifest).
// Assigning again with another build or other settings replaces the assignment.
type ModuleAssigned struct {
	Node     string            `json:"node"`
	Module   string            `json:"module"`
	Build    string            `json:"build"`
	Settings map[string]string `json:"settings"`
}

// ModuleUnassigned: the node is no longer to hold the module.
type ModuleUnassigned struct {
	Node   string `json:"node"`
	Module string `json:"module"`
}

func (ModuleRegistered) EventType() string { return "ModuleRegistered" }
func (ModuleAssigned) EventType() string   { return "ModuleAssigned" }
func (ModuleUnassigned) EventType() string { return "ModuleUnassigned" }
