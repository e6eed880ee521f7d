package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/wire"
	"github.com/posener/complete"
	"github.com/willabides/kongplete"
)

// Completion of the names the running mesh knows: an argument tagged
// predictor:"node" completes the nodes of the mesh the line being completed
// names (its --home and --bus, or their variables, as the command would
// reach it); predictor:"module" its modules. kongplete answers everything
// else from the grammar.

// completeWait bounds how long a completion waits for the controller: a
// shell's Tab must never hang on a mesh that is down, which then simply
// completes no names.
const completeWait = 2 * time.Second

// predictors are the named completions of the grammar's tags.
func predictors(ctx context.Context) []kongplete.Option {
	return []kongplete.Option{
		kongplete.WithPredictor("node", namesFrom(ctx, nodeNames)),
		kongplete.WithPredictor("module", namesFrom(ctx, moduleNames)),
	}
}

// namesFrom is a predictor asking the mesh of the line being completed for
// names. Any failure (no mesh, no controller, no permission) completes
// nothing: a completion prints candidates only, never an error.
func namesFrom(ctx context.Context, names func(context.Context, *cmdline.Globals) ([]string, error)) complete.Predictor {
	return complete.PredictFunc(func(complete.Args) []string {
		ctx, cancel := context.WithTimeout(ctx, completeWait)
		defer cancel()
		// The whole line, not the predictor's arguments: those start at
		// the subcommand, and the --home before it is the one that counts.
		got, err := names(ctx, completionGlobals(strings.Fields(os.Getenv("COMP_LINE"))))
		if err != nil {
			return nil
		}
		return got
	})
}

func nodeNames(ctx context.Context, g *cmdline.Globals) ([]string, error) {
	var r wire.NodeList
	if err := g.Call(ctx, wire.SubjectNodeList, wire.ListRequest{Brief: true}, &r); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		out = append(out, n.Name)
	}
	return out, nil
}

func moduleNames(ctx context.Context, g *cmdline.Globals) ([]string, error) {
	var r wire.ModuleList
	if err := g.Call(ctx, wire.SubjectModuleList, wire.Empty{}, &r); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(r.Modules))
	for _, m := range r.Modules {
		out = append(out, m.Name)
	}
	return out, nil
}

// completionGlobals are the flags that reach a mesh, as the line being
// completed gives them (kong has not parsed it: it is not whole), else
// from the variables kong would read, else their defaults. Without them a
// completion in another home's directory would list this one's names.
func completionGlobals(args []string) *cmdline.Globals {
	g := &cmdline.Globals{
		Home:    envOr("MESH_HOME", "./.mesh"),
		TLSCA:   os.Getenv("MESH_TLS_CA"),
		TLSCert: os.Getenv("MESH_TLS_CERT"),
		TLSKey:  os.Getenv("MESH_TLS_KEY"),
		Creds:   os.Getenv("MESH_CREDS"),
		Timeout: completeWait,
	}
	flags := map[string]*string{"--home": &g.Home, "--bus": &g.Bus, "--tls-ca": &g.TLSCA, "--tls-cert": &g.TLSCert, "--tls-key": &g.TLSKey, "--creds": &g.Creds}
	for i, a := range args {
		name, value, inline := strings.Cut(a, "=")
		p, ok := flags[name]
		switch {
		case !ok:
		case inline:
			*p = value
		case i+1 < len(args):
			*p = args[i+1]
		}
	}
	return g
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
