package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/alecthomas/kong"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
	"github.com/willabides/kongplete"
)

// CLI is the whole grammar of mesh.
type CLI struct {
	Globals

	Up          UpCmd          `cmd:"" group:"run" help:"Run a single-box mesh: an embedded NATS bus and the controller."`
	Serve       ServeCmd       `cmd:"" group:"run" help:"Run the controller alone, on the bus named by --bus or MESH_NATS_URL."`
	BusConfig   BusConfigCmd   `cmd:"" group:"run" name:"bus-config" help:"Print the configuration that closes a NATS cluster for this mesh (mesh serve --closed)."`
	HTTPToken   HTTPTokenCmd   `cmd:"" group:"run" name:"http-token" help:"Print the operator's token for the HTTP listener off loopback (Authorization: Bearer TOKEN)."`
	Node        NodeCmd        `cmd:"" group:"fleet" help:"Enroll, list, show and retire nodes."`
	Module      ModuleCmd      `cmd:"" group:"fleet" help:"Register, list and show modules."`
	Assign      AssignCmd      `cmd:"" group:"fleet" help:"Give a node a module's build (the latest unless --build) under an upgrade policy."`
	Unassign    UnassignCmd    `cmd:"" group:"fleet" help:"Take a module off a node."`
	Network     NetworkCmd     `cmd:"" group:"fleet" help:"The mesh's overlay network: its range, and each node's address."`
	Seat        SeatCmd        `cmd:"" group:"fleet" help:"Seats: roles one module holds mesh-wide; their holders and handovers."`
	Plan        PlanCmd        `cmd:"" group:"send" help:"What a node would be sent now, and how it differs from what it was sent."`
	Push        PushCmd        `cmd:"" group:"send" help:"Compose, sign and send each node its declaration."`
	Declare     DeclareCmd     `cmd:"" group:"send" help:"Send a node a hand-written declaration, numbered, chained and signed like any other."`
	Rollout     RolloutCmd     `cmd:"" group:"send" help:"Roll a new build out in waves: the plan of every wave, before anything is sent."`
	Rotate      RotateCmd      `cmd:"" group:"secrets" help:"Move a provider's minted credentials for a consumer to a new generation, both ends together or neither."`
	Secret      SecretCmd      `cmd:"" group:"secrets" help:"Forget a secret setting's values for good."`
	Agent       AgentCmd       `cmd:"" group:"run" help:"Run a node's agent: verify, apply under --root, report."`
	Status      StatusCmd      `cmd:"" group:"send" help:"Is the mesh well, and if not, where: every node's state and every failing provider."`
	Logs        LogsCmd        `cmd:"" group:"send" help:"Print a module's program log from its node: stdout and stderr, newest last; --follow for what comes."`
	Report      ReportCmd      `cmd:"" group:"send" help:"Record a provider failing a consumer, or recovering."`
	History     HistoryCmd     `cmd:"" group:"proof" help:"Every declaration a node was told, when, and what it reported back."`
	Audit       AuditCmd       `cmd:"" group:"proof" help:"Prove a node's record, or the whole mesh's: signatures both ways, the chain, foreign messages."`
	Token       TokenCmd       `cmd:"" group:"fleet" help:"Enrolment tokens: join strings machines enrol themselves with, making their own keys."`
	Foreign     ForeignCmd     `cmd:"" group:"proof" help:"Messages on the stream that are not their rightful writer's: list and acknowledge them."`
	Backup      BackupCmd      `cmd:"" group:"care" help:"Write the stream and the controller's key to a directory, while the mesh runs."`
	Restore     RestoreCmd     `cmd:"" group:"care" help:"Bring a backup into a home and bus that hold no mesh yet."`
	Events      EventsCmd      `cmd:"" group:"proof" help:"Print the event log, with stream sequences."`
	Projections ProjectionsCmd `cmd:"" group:"care" help:"Inspect and rebuild the controller's read models."`
	Fleet       FleetCmd       `cmd:"" group:"run" help:"Run many real agents in this process and time what they are sent: the mesh's load harness."`
	Completion  CompletionCmd  `cmd:"" group:"run" help:"Print the script that completes mesh's commands and flags in bash, zsh or fish."`
	VersionCmd  VersionCmd     `cmd:"" group:"run" name:"version" help:"Print mesh's version: the module's, and the commit it was built from."`
}

// CompletionCmd prints a shell's completion script. The script asks mesh
// itself for completions (kongplete answers, from this very grammar), so
// it never goes stale.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish."`
}

func (c *CompletionCmd) Help() string {
	return "Examples:\n  source <(mesh completion bash)       # in ~/.bashrc\n  mesh completion fish > ~/.config/fish/completions/mesh.fish"
}

// completionScripts are posener/complete's protocol for each shell: set
// COMP_LINE and run the binary, which prints the candidates.
var completionScripts = map[string]string{
	"bash": "complete -C %[1]q mesh\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -C %[1]q mesh\n",
	"fish": "function __complete_mesh\n    set -lx COMP_LINE (commandline -cp)\n    test -z (commandline -ct)\n    and set COMP_LINE \"$COMP_LINE \"\n    %[1]q\nend\ncomplete -f -c mesh -a \"(__complete_mesh)\"\n",
}

func (c *CompletionCmd) Run(out *Output) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this binary's path for the script: %w", err)
	}
	fmt.Fprintf(out.Out, completionScripts[c.Shell], bin)
	return nil
}

// VersionCmd prints what --version prints.
type VersionCmd struct{}

func (VersionCmd) Run(out *Output) error {
	fmt.Fprintln(out.Out, version())
	return nil
}

// version is the build's module version and the commit it was built from
// (with "+modified" when the tree had changes), as Go records them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "mesh (no build information)"
	}
	v, commit, modified := info.Main.Version, "unknown", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	return fmt.Sprintf("mesh %s, commit %s%s, %s", v, commit, modified, info.GoVersion)
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
	TLSCA     string           `name:"tls-ca" env:"MESH_TLS_CA" help:"The CA that signs the bus's certificate (default: the one mesh up --tls keeps in --home, if any)."`
	TLSCert   string           `name:"tls-cert" env:"MESH_TLS_CERT" help:"A client certificate, where the bus asks for one."`
	TLSKey    string           `name:"tls-key" env:"MESH_TLS_KEY" help:"The key of --tls-cert."`
	Creds     string           `env:"MESH_CREDS" help:"A NATS credentials file, for an existing cluster that asks for one."`
	LogFormat string           `name:"log-format" env:"MESH_LOG_FORMAT" default:"text" enum:"text,json" help:"How up, serve and agent log: text for a person, or json (full timestamps, every field an attribute) for a collector."`
	Version   kong.VersionFlag `help:"Print mesh's version and exit."`
	Timeout   time.Duration    `help:"How long to wait for the controller's answer (default 5s; push 5m; audit, projections rebuild and verify 30m). A change whose answer does not come exits 3: it may have landed."`
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
// 3 not answered). With no err it prints nothing: the output said it.
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
		kong.Vars{"version": version()},
		kong.ExplicitGroups([]kong.Group{
			{Key: "run", Title: "Run the mesh"},
			{Key: "fleet", Title: "Machines and modules"},
			{Key: "send", Title: "Tell machines, and see what they did"},
			{Key: "secrets", Title: "Secrets"},
			{Key: "proof", Title: "History and proof"},
			{Key: "care", Title: "Backup, restore, read models"},
		}),
	)
}

// Exit codes, the same whichever side refused (the command line or the
// controller: the remote error's code says which kind it was).
const (
	exitDone      = 0
	exitFailed    = 1
	exitNotUnders = 2 // not understood, or ambiguous
	exitUnknown   = 3 // a change was asked for and its outcome is unknown, or a question went unanswered
)

// exitFor is the exit code of a command's error.
func exitFor(err error) int {
	var ue usageError
	var ee exitError
	var re *client.RemoteError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitNotUnders
	case errors.Is(err, client.ErrUnknownOutcome), errors.Is(err, client.ErrNoAnswer):
		return exitUnknown
	case errors.As(err, &re) && re.Code == wire.CodeBadRequest:
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
	// A shell asking for completions (COMP_LINE set by the script mesh
	// completion printed) is answered here, and nothing else runs.
	kongplete.Complete(parser, predictors(ctx)...)
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "mesh: %v; see mesh --help\n", err)
		return 2
	}
	if err := kctx.Run(&cli.Globals); err != nil {
		if msg := err.Error(); msg != "" {
			// An error may carry what a node said (push --wait: its
			// failure's reasons): shown, as every node's word is.
			fmt.Fprintln(stderr, "mesh:", text.Shown(msg))
		}
		return exitFor(err)
	}
	return exitDone
}

// logger is the log of a long-running command, in --log-format.
func (g *Globals) logger(w io.Writer) *slog.Logger {
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
	return newLogger(w)
}

// newLogger writes the controller's log as short human lines: the time (in
// the one form every output prints, text.Time), the message, and key=value
// pairs; the level only when it is not INFO.
func newLogger(w io.Writer) *slog.Logger {
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
