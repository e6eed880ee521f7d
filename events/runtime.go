package events

import "fmt"

// A module may run a program on each node it is on (its manifest's run).
// The node's agent supervises it and says what happens as signed reports
// of its own (rule 19: only the node's agent may say them of the node).

// RuntimeStarted: the agent started a module's program, under the
// declaration of sequence Sequence.
type RuntimeStarted struct {
	Node     string `json:"node"`
	Module   string `json:"module"`
	PID      int    `json:"pid"`
	Sequence uint64 `json:"sequence"`
	// Checked: the program has a health check, so until the agent says
	// RuntimeHealthy it is starting, not healthy. Omitted when false, so
	// a start reported before checks existed reads as it was written.
	Checked bool `json:"checked,omitempty"`
	// Digest is the artifact the program is, when its declaration says
	// so (issue 32): which bytes the node runs. Omitted otherwise.
	Digest string `json:"digest,omitempty"`
}

// RuntimeExited: the program ended without being asked to, with a code or
// by a signal, or could not be started at all (Reason). The agent starts it
// again after a backoff.
type RuntimeExited struct {
	Node   string `json:"node"`
	Module string `json:"module"`
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// RuntimeCrashLooping: the program exited Exits times within Seconds. The
// agent keeps starting it, further apart; status names it until it is
// steady again.
type RuntimeCrashLooping struct {
	Node    string `json:"node"`
	Module  string `json:"module"`
	Exits   int    `json:"exits"`
	Seconds int    `json:"seconds"`
}

// RuntimeSteady: a program that was crash-looping has run a whole window
// without exiting.
type RuntimeSteady struct {
	Node   string `json:"node"`
	Module string `json:"module"`
}

// RuntimeStopped: the agent stopped the program, because its module left
// the declaration or the agent itself stopped (Reason).
type RuntimeStopped struct {
	Node   string `json:"node"`
	Module string `json:"module"`
	Reason string `json:"reason"`
}

// RuntimeHealthy: the program's health check passed Successes times in a
// row since it started, or since it was unhealthy (issue 31). The agent
// says only such a change, never each probe: a healthy program costs the
// bus nothing.
type RuntimeHealthy struct {
	Node   string `json:"node"`
	Module string `json:"module"`
}

// RuntimeUnhealthy: the program's health check failed Failures times in
// a row (past its start period), the last for Reason.
type RuntimeUnhealthy struct {
	Node     string `json:"node"`
	Module   string `json:"module"`
	Failures int    `json:"failures"`
	Reason   string `json:"reason"`
}

// Detail says how the program ended, in the words status and the agent's
// log use.
func (e RuntimeExited) Detail() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Signal != "":
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

func (RuntimeStarted) EventType() string      { return "RuntimeStarted" }
func (RuntimeExited) EventType() string       { return "RuntimeExited" }
func (RuntimeCrashLooping) EventType() string { return "RuntimeCrashLooping" }
func (RuntimeSteady) EventType() string       { return "RuntimeSteady" }
func (RuntimeStopped) EventType() string      { return "RuntimeStopped" }
func (RuntimeHealthy) EventType() string      { return "RuntimeHealthy" }
func (RuntimeUnhealthy) EventType() string    { return "RuntimeUnhealthy" }

// RuntimeModule is the module a runtime report is about ("" for another
// event).
func RuntimeModule(ev Event) string {
	switch r := ev.(type) {
	case RuntimeStarted:
		return r.Module
	case RuntimeExited:
		return r.Module
	case RuntimeCrashLooping:
		return r.Module
	case RuntimeSteady:
		return r.Module
	case RuntimeStopped:
		return r.Module
	case RuntimeHealthy:
		return r.Module
	case RuntimeUnhealthy:
		return r.Module
	}
	return ""
}
