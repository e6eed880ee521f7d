package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kong"
	"github.com/meshctl/mesh/commands"
)

// CLI is the whole grammar of mesh.
type CLI struct {
	Globals

	Up          UpCmd          `cmd:"" help:"Run a single-box mesh: an embedded NATS bus and the controller."`
	Serve       ServeCmd       `cmd:"" help:"Run the controller alone, on the bus named by --bus or MESH_NATS_URL."`
	BusConfig   BusConfigCmd   `cmd:"" name:"bus-config" help:"Print the configuration that closes a NATS cluster for this mesh (mesh serve --closed)."`
	Node        NodeCmd        `cmd:"" help:"Enroll, list, show and retire nodes."`
	Module      ModuleCmd      `cmd:"" help:"Register, list and show modules."`
	Assign      AssignCmd      `cmd:"" help:"Give a node a module's latest build (again: upgrade it)."`
	Unassign    UnassignCmd    `cmd:"" help:"Take a module off a node."`
	Plan        PlanCmd        `cmd:"" help:"What a node would be sent now, and how it differs from what it was sent."`
	Push        PushCmd        `cmd:"" help:"Compose, sign and send each node its declaration."`
	Declare     DeclareCmd     `cmd:"" help:"Send a node a hand-written declaration, numbered, chained and signed like any other."`
	Rotate      RotateCmd      `cmd:"" help:"Move a provider's minted credentials for a consumer to a new generation, both ends together or neither."`
	Secret      SecretCmd      `cmd:"" help:"Forget a secret setting's values for good."`
	Agent       AgentCmd       `cmd:"" help:"Run a node's agent: verify, apply under --root, report."`
	Status      StatusCmd      `cmd:"" help:"Is the mesh well, and if not, where: every node's state and every failing provider."`
	Report      ReportCmd      `cmd:"" help:"Record a provider failing a consumer, or recovering."`
	History     HistoryCmd     `cmd:"" help:"Every declaration a node was told, when, and what it reported back."`
	Audit       AuditCmd       `cmd:"" help:"Prove a node's record, or the whole mesh's: signatures both ways, the chain, foreign messages."`
	Foreign     ForeignCmd     `cmd:"" help:"Messages on the stream that are not their rightful writer's: list and acknowledge them."`
	Backup      BackupCmd      `cmd:"" help:"Write the stream and the controller's key to a directory, while the mesh runs."`
	Restore     RestoreCmd     `cmd:"" help:"Bring a backup into a home and bus that hold no mesh yet."`
	Events      EventsCmd      `cmd:"" help:"Print the event log, with stream sequences."`
	Projections ProjectionsCmd `cmd:"" help:"Inspect and rebuild the controller's read models."`
	Fleet       FleetCmd       `cmd:"" help:"Run many real agents in this process and time what they are sent: the mesh's load harness."`
}

// Globals are the flags every command takes.
type Globals struct {
	Home string `env:"MESH_HOME" default:"./.mesh" help:"Local state: the embedded bus's data, the read models, where mesh up records its bus."`
	// Bus is deliberately not bound to MESH_NATS_URL by kong: the flag and the
	// variable are compared, and refused when they disagree (see resolveBus).
	Bus string `help:"The NATS URL of the bus (or set MESH_NATS_URL). Without either, the bus mesh up recorded in --home."`
	// Timeout bounds every wait for the controller (rule 26). Zero: the
	// verb's own default (5s; push 5m; audit and projections 30m).
	// TLS of a bus that speaks it: mesh up --tls keeps its CA in the home,
	// which the commands of that home trust by themselves; an existing
	// cluster's is given.
	TLSCA   string        `name:"tls-ca" env:"MESH_TLS_CA" help:"The CA that signs the bus's certificate (default: the one mesh up --tls keeps in --home, if any)."`
	TLSCert string        `name:"tls-cert" env:"MESH_TLS_CERT" help:"A client certificate, where the bus asks for one."`
	TLSKey  string        `name:"tls-key" env:"MESH_TLS_KEY" help:"The key of --tls-cert."`
	Creds   string        `env:"MESH_CREDS" help:"A NATS credentials file, for an existing cluster that asks for one."`
	Timeout time.Duration `help:"How long to wait for the controller's answer (default 5s; push 5m; audit, projections rebuild and verify 30m). A change whose answer does not come exits 3: it may have landed."`
}

// timeoutOr is --timeout when given, else the verb's default.
func (g *Globals) timeoutOr(def time.Duration) time.Duration {
	if g.Timeout > 0 {
		return g.Timeout
	}
	return def
}

// Output is where a command writes: results on Out, diagnostics on Err.
type Output struct {
	Out, Err io.Writer
}

// usageError is a request that cannot be carried out as given: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type exitCode int

// exitError is a failure with an exit code of its own (status: 1 not well,
// 2 not answered). With no err it prints nothing: the output said it.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

// newParser builds the kong parser; tests call it as main does.
func newParser(ctx context.Context, cli *CLI, out *Output) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("mesh"),
		kong.Description("A control plane for a fleet of machines, event-sourced on NATS JetStream."),
		kong.Writers(out.Out, out.Err),
		kong.Exit(func(code int) { panic(exitCode(code)) }),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(out),
	)
}

// Exit codes, the same whichever side refused (the command line or the
// controller: the remote error's code says which kind it was).
const (
	exitDone      = 0
	exitFailed    = 1
	exitNotUnders = 2 // not understood, or ambiguous
	exitUnknown   = 3 // a change was asked for and its outcome is unknown
)

// exitFor is the exit code of a command's error.
func exitFor(err error) int {
	var ue usageError
	var ee exitError
	var re *commands.RemoteError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitNotUnders
	case errors.Is(err, commands.ErrUnknownOutcome):
		return exitUnknown
	case errors.As(err, &re) && re.Code == commands.CodeBadRequest:
		return exitNotUnders
	}
	return exitFailed
}

// run parses args and runs the command. Exit codes: 0 done, 1 failed, 2 the
// request was not understood or was ambiguous, 3 the outcome of a change is
// unknown.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	out := &Output{Out: stdout, Err: stderr}
	var cli CLI
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(exitCode)
			if !ok {
				panic(r)
			}
			code = int(c)
		}
	}()
	parser, err := newParser(ctx, &cli, out)
	if err != nil {
		fmt.Fprintln(stderr, "mesh:", err)
		return 2
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "mesh: %v; see mesh --help\n", err)
		return 2
	}
	if err := kctx.Run(&cli.Globals); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "mesh:", msg)
		}
		return exitFor(err)
	}
	return exitDone
}

// newLogger writes the controller's log as short human lines: the time, the
// message, and key=value pairs; the level only when it is not INFO.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String(slog.TimeKey, a.Value.Time().Format(time.TimeOnly))
			case slog.LevelKey:
				if a.Value.String() == slog.LevelInfo.String() {
					return slog.Attr{}
				}
			}
			return a
		},
	}))
}
