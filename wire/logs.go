package wire

import "time"

// A module's program log (issue 31 point 8) is asked of the node's agent,
// not of the controller: the output stays on the machine that made it and
// never enters the log. The operator publishes a LogsRequest on
// events.LogsSubject(node) naming a reply subject under
// events.LogsReplyPrefix(node); the agent answers there with one LogsReply,
// or with a refusal in the controller's headers (micro's error and code,
// KindHeader), so the client reads both sides' refusals one way.

// LogStream says where a line of a program's log came from.
type LogStream string

const (
	LogStdout LogStream = "stdout"
	LogStderr LogStream = "stderr"
	// LogAgent is the agent's own word about the program: it could not
	// be started, it exited, it was stopped.
	LogAgent LogStream = "agent"
)

// LogLine is one line of a program's log: when the agent read it, from
// which stream, and its text (without its newline; a line longer than
// MaxLogLine comes as several).
type LogLine struct {
	Time   time.Time `json:"time"`
	Stream LogStream `json:"stream"`
	Text   string    `json:"text"`
}

// MaxLogLine is the longest line a log keeps whole, in bytes: a longer one
// is cut into lines of at most this, so that one line always fits an answer.
const MaxLogLine = 4 << 10

// LogsRequest asks a node's agent for module's program log.
type LogsRequest struct {
	Module string `json:"module"`
	// Lines is how many of the newest lines (0: every line kept).
	Lines int `json:"lines,omitempty"`
	// After, when not 0, asks for the lines after the one of that number
	// (a LogsReply's Last) instead: how a long log is read in pieces and
	// how --follow asks for what came since.
	After uint64 `json:"after,omitempty"`
	// WaitMS, when there is nothing after After, is how long the agent may
	// wait for a new line before it answers none: --follow's long poll.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// LogsReply is a piece of a program's log.
type LogsReply struct {
	Lines []LogLine `json:"lines"`
	// Last is the number of the last line given (of the last line kept
	// when none is given): the After of the next request.
	Last uint64 `json:"last"`
	// More: lines after Last are kept that did not fit this answer.
	More bool `json:"more,omitempty"`
	// Dropped is how many lines after the request's After the bound
	// dropped before they were read (a --follow slower than the program).
	Dropped uint64 `json:"dropped,omitempty"`
}

// LogsOutput is what mesh logs --json prints: the lines, oldest first.
type LogsOutput struct {
	Node   string    `json:"node"`
	Module string    `json:"module"`
	Lines  []LogLine `json:"lines"`
}
