// Package cmdline is what every mesh command stands on: the flags all of
// them take (Globals), where they write (Output), the errors that choose
// the exit code (one table, README's), reaching the bus (the address from
// a flag, the environment or the home, its TLS and credentials, the
// client), and the bulk verbs' batches. The verbs live in package main,
// the processes that run the mesh (up, serve, agent, fleet) in cmd/mesh/daemon;
// both stand on this, so neither imports the other.
package cmdline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kong"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// Globals are the flags every command takes.
type Globals struct {
	Home string `env:"MESH_HOME" default:"./.mesh" help:"Local state: the embedded bus's data, the read models, where mesh up records its bus."`
	// Bus is deliberately not bound to MESH_NATS_URL by kong: the flag and the
	// variable are compared, and refused when they disagree (see ResolveBus).
	Bus string `help:"The NATS URL of the bus (or set MESH_NATS_URL). Without either, the bus mesh up recorded in --home."`
	// Timeout bounds every wait for the controller (rule 26). Zero: the
	// verb's own default (5s; push 5m; audit and projections 30m).
	// TLS of a bus that speaks it: mesh up --tls keeps its CA in the home,
	// which the commands of that home trust by themselves; an existing
	// cluster's is given.
	TLSCA     string           `name:"tls-ca" env:"MESH_TLS_CA" help:"The CA that signs the bus's certificate (default: the one mesh up --tls keeps in --home, if any)."`
	TLSCert   string           `name:"tls-cert" env:"MESH_TLS_CERT" help:"A client certificate, where the bus asks for one."`
	TLSKey    string           `name:"tls-key" env:"MESH_TLS_KEY" help:"The key of --tls-cert."`
	Creds     string           `env:"MESH_CREDS" help:"An operator's key file (mesh operator add writes one) to act as, instead of the home's; or a NATS credentials file, for an existing cluster that asks for one."`
	LogFormat string           `name:"log-format" env:"MESH_LOG_FORMAT" default:"text" enum:"text,json" help:"How up, serve and agent log: text for a person, or json (full timestamps, every field an attribute) for a collector."`
	Version   kong.VersionFlag `help:"Print mesh's version and exit."`
	Timeout   time.Duration    `help:"How long to wait for the controller's answer (default 5s; push 5m; audit, projections rebuild and verify 30m). A change whose answer does not come exits 3: it may have landed. For up and serve: how long a start keeps asking a bus that does not answer (default 1m)."`
}

// TimeoutOr is --timeout when given, else the verb's default.
func (g *Globals) TimeoutOr(def time.Duration) time.Duration {
	if g.Timeout > 0 {
		return g.Timeout
	}
	return def
}

// Output is where a command writes: results on Out, diagnostics on Err.
type Output struct {
	Out, Err io.Writer
}

// UsageError is a request that cannot be carried out as given: exit 2.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

type ExitCode int

// ExitError is a failure with an exit code of its own (status: 1 not well,
// 3 not answered). With no err it prints nothing: the output said it.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// Exit codes, the same whichever side refused (the command line or the
// controller: the remote error's code says which kind it was).
const (
	ExitDone      = 0
	ExitFailed    = 1
	ExitNotUnders = 2 // not understood, or ambiguous
	ExitUnknown   = 3 // a change was asked for and its outcome is unknown, or a question went unanswered
)

// ExitFor is the exit code of a command's error.
func ExitFor(err error) int {
	var ue UsageError
	var ee ExitError
	var re *client.RemoteError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		return ExitNotUnders
	case errors.Is(err, client.ErrUnknownOutcome), errors.Is(err, client.ErrNoAnswer):
		return ExitUnknown
	case errors.As(err, &re) && re.Code == wire.CodeBadRequest:
		return ExitNotUnders
	}
	return ExitFailed
}

// Logger is the log of a long-running command, in --log-format.
func (g *Globals) Logger(w io.Writer) *slog.Logger {
	if g.LogFormat == "json" {
		// Full timestamps, in UTC as every time mesh prints: a collector
		// compares lines from machines in different zones.
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Time(slog.TimeKey, a.Value.Time().UTC())
			}
			return a
		}}))
	}
	return NewLogger(w)
}

// NewLogger writes the controller's log as short human lines: the time (in
// the one form every output prints, text.Time), the message, and key=value
// pairs; the level only when it is not INFO.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String(slog.TimeKey, text.Time(a.Value.Time()))
			case slog.LevelKey:
				if a.Value.String() == slog.LevelInfo.String() {
					return slog.Attr{}
				}
			}
			return a
		},
	}))
}

// Joining is node join --json and node rekey --json: the node and the join
// string its agent starts with.
type Joining struct {
	Node string `json:"node"`
	Join string `json:"join"`
}
