package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/alecthomas/kong"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/daemon"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/willabides/kongplete"
)

// CLI is the whole grammar of mesh.
type CLI struct {
	cmdline.Globals

	Up          daemon.UpCmd        `cmd:"" group:"run" help:"Run a single-box mesh: an embedded NATS bus and the controller."`
	Serve       daemon.ServeCmd     `cmd:"" group:"run" help:"Run the controller alone, on the bus named by --bus or MESH_NATS_URL."`
	BusConfig   daemon.BusConfigCmd `cmd:"" group:"run" name:"bus-config" help:"Print the configuration that closes a NATS cluster for this mesh (mesh serve --closed)."`
	HTTPToken   daemon.HTTPTokenCmd `cmd:"" group:"run" name:"http-token" help:"Print the operator's token for the HTTP listener off loopback (Authorization: Bearer TOKEN)."`
	Node        NodeCmd             `cmd:"" group:"fleet" help:"Enroll, list, show and retire nodes."`
	Module      ModuleCmd           `cmd:"" group:"fleet" help:"Register, list and show modules."`
	Assign      AssignCmd           `cmd:"" group:"fleet" help:"Give a node a module's build (the latest unless --build) under an upgrade policy."`
	Unassign    UnassignCmd         `cmd:"" group:"fleet" help:"Take a module off a node."`
	Network     NetworkCmd          `cmd:"" group:"fleet" help:"The mesh's overlay network: its range, and each node's address."`
	Seat        SeatCmd             `cmd:"" group:"fleet" help:"Seats: roles one module holds mesh-wide; their holders and handovers."`
	Artifact    ArtifactCmd         `cmd:"" group:"fleet" help:"Artifacts: files stored in the mesh by their sha256, which manifests install (programs, archives)."`
	Plan        PlanCmd             `cmd:"" group:"send" help:"What a node would be sent now, and how it differs from what it was sent."`
	Push        PushCmd             `cmd:"" group:"send" help:"Compose, sign and send each node its declaration."`
	Declare     DeclareCmd          `cmd:"" group:"send" help:"Send a node a hand-written declaration, numbered, chained and signed like any other."`
	Rollout     RolloutCmd          `cmd:"" group:"send" help:"Roll a new build out in waves: the plan of every wave, before anything is sent."`
	Rotate      RotateCmd           `cmd:"" group:"secrets" help:"Move a provider's minted credentials for a consumer to a new generation, both ends together or neither."`
	Secret      SecretCmd           `cmd:"" group:"secrets" help:"Forget a secret setting's values for good."`
	Agent       daemon.AgentCmd     `cmd:"" group:"run" help:"Run a node's agent: verify, apply under --root, report."`
	Status      StatusCmd           `cmd:"" group:"send" help:"Is the mesh well, and if not, where: every node's state and every failing provider."`
	Logs        LogsCmd             `cmd:"" group:"send" help:"Print a module's program log from its node: stdout and stderr, newest last; --follow for what comes."`
	Report      ReportCmd           `cmd:"" group:"send" help:"Record a provider failing a consumer, or recovering."`
	History     HistoryCmd          `cmd:"" group:"proof" help:"Every declaration a node was told, when, and what it reported back."`
	Audit       AuditCmd            `cmd:"" group:"proof" help:"Prove a node's record, or the whole mesh's: signatures both ways, the chain, foreign messages."`
	Token       TokenCmd            `cmd:"" group:"fleet" help:"Enrolment tokens: join strings machines enrol themselves with, making their own keys."`
	Operator    OperatorCmd         `cmd:"" group:"care" help:"Operators: who may run which verbs (viewer, deployer, admin), each with a key of its own."`
	Foreign     ForeignCmd          `cmd:"" group:"proof" help:"Messages on the stream that are not their rightful writer's: list and acknowledge them."`
	Backup      BackupCmd           `cmd:"" group:"care" help:"Write the stream and the controller's key to a directory, while the mesh runs."`
	Restore     RestoreCmd          `cmd:"" group:"care" help:"Bring a backup into a home and bus that hold no mesh yet."`
	Events      EventsCmd           `cmd:"" group:"proof" help:"Print the event log, with stream sequences."`
	Projections ProjectionsCmd      `cmd:"" group:"care" help:"Inspect and rebuild the controller's read models."`
	Fleet       daemon.FleetCmd     `cmd:"" group:"run" help:"Run many real agents in this process and time what they are sent: the mesh's load harness."`
	Traffic     daemon.TrafficCmd   `cmd:"" group:"run" hidden:"" help:"Write a long stream of a busy mesh's traffic straight to the log, signed as the controller of --home: a bench's tool."`
	Bench       daemon.BenchCmd     `cmd:"" group:"run" help:"Measure the mesh against this machine's floor in one run (its own buses, controllers, simulated and real agents); exit 0 only when every row is within its bound."`
	Completion  CompletionCmd       `cmd:"" group:"run" help:"Print the script that completes mesh's commands and flags in bash, zsh or fish."`
	VersionCmd  VersionCmd          `cmd:"" group:"run" name:"version" help:"Print mesh's version: the module's, and the commit it was built from."`
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

func (c *CompletionCmd) Run(out *cmdline.Output) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this binary's path for the script: %w", err)
	}
	fmt.Fprintf(out.Out, completionScripts[c.Shell], bin)
	return nil
}

// VersionCmd prints what --version prints.
type VersionCmd struct{}

func (VersionCmd) Run(out *cmdline.Output) error {
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

// newParser builds the kong parser; tests call it as main does.
func newParser(ctx context.Context, cli *CLI, out *cmdline.Output) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("mesh"),
		kong.Description("A control plane for a fleet of machines, event-sourced on NATS JetStream."),
		kong.Writers(out.Out, out.Err),
		kong.Exit(func(code int) { panic(cmdline.ExitCode(code)) }),
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

// run parses args and runs the command. Exit codes: 0 done, 1 failed, 2 the
// request was not understood or was ambiguous, 3 the outcome of a change is
// unknown.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	out := &cmdline.Output{Out: stdout, Err: stderr}
	var cli CLI
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(cmdline.ExitCode)
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
		return cmdline.ExitFor(err)
	}
	return cmdline.ExitDone
}
