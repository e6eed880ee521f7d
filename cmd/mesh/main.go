// Command mesh is the mesh's one binary: the single-box mesh (up), the
// controller alone (serve), and the operator's verbs. The grammar is in cli.go,
// one file per command group beside it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
