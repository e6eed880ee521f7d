// Command mesh-greeter is the example module that runs (issue 15): the node's
// agent starts it as the greeter module's run. It reads its config (the
// greeting the mesh wrote to /etc/greeter/greeter.conf under the node's
// root), joins the bus as itself (meshmod), and answers requests for a
// greeting on mesh.svc.greeting.NODE. A request names its consumer in the
// Mesh-Consumer header. With no greeting configured it cannot serve: it
// answers an error and reports itself failing that consumer, once; when it
// serves that consumer again it reports recovered. Which consumers it is
// failing, and how many greetings it has served, it keeps in its own state
// (its node's keys of its module's bucket), so a restart (a config
// change restarts it) forgets neither. It answers its health check over
// HTTP on GREETER_HEALTH (host:port, which its manifest's run sets and its
// health check asks): GET /healthz is 200 while it has a greeting to give,
// 503 while it has none, so a rollout waits for a greeter that can greet.
//
// The agents' machines need not have it: the operator builds it once (go
// build -o mesh-greeter ./examples/mesh-greeter) and puts it into the mesh
// (mesh artifact put mesh-greeter), and greeter.json installs those bytes,
// by digest, at /usr/local/bin/mesh-greeter under each node's root.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/meshmod"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// build names this build of the program in its log: go build -ldflags
// '-X main.build=2' makes other bytes, so another artifact digest and
// another build of the greeter module, which a rollout takes node by
// node (the README's walkthrough).
var build = "1"

// ConsumerHeader names who asks: the consumer a standing is about.
const ConsumerHeader = "Mesh-Consumer"

func main() {
	log.SetFlags(0)
	log.SetPrefix("greeter: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	m, err := meshmod.Connect()
	if err != nil {
		return err
	}
	defer m.Close()
	greeting, err := readGreeting(filepath.Join(m.Root, "etc/greeter/greeter.conf"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	state, err := m.State(ctx)
	if err != nil {
		return fmt.Errorf("cannot open its state bucket: %w", err)
	}
	serve := func(msg *nats.Msg) {
		consumer := msg.Header.Get(ConsumerHeader)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if greeting == "" {
			msg.Respond([]byte("error: no greeting is configured on " + m.Node))
			if consumer != "" {
				if _, err := state.Create(rctx, "failing."+consumer, []byte("1")); err == nil {
					report(m.Failing(rctx, consumer, "no greeting is configured"))
				}
			}
			return
		}
		msg.Respond([]byte(greeting))
		if consumer != "" {
			if _, err := state.Get(rctx, "failing."+consumer); err == nil {
				report(m.Recovered(rctx, consumer))
				report(state.Delete(rctx, "failing."+consumer))
			}
		}
		count(rctx, state, "served")
	}
	for _, subject := range []string{events.ServiceSubject("greeting", m.Node), events.ServiceSubject("greeting", events.ServiceAny)} {
		if _, err := m.NC.QueueSubscribe(subject, "greeter", serve); err != nil {
			return err
		}
	}
	if err := m.NC.Flush(); err != nil {
		return err
	}
	if addr := os.Getenv("GREETER_HEALTH"); addr != "" {
		if err := serveHealth(ctx, addr, greeting, m.Node); err != nil {
			return err
		}
	}
	log.Printf("build %s serving %q on %s as %s on %s", build, greeting, events.ServiceSubject("greeting", m.Node), m.Module, m.Node)
	<-ctx.Done()
	return m.NC.Drain()
}

// serveHealth answers GET /healthz on addr until ctx ends: healthy while
// there is a greeting to give. A port it cannot take is its exit, in its
// own words: a greeter whose check asks another's port would be called
// healthy for it.
func serveHealth(ctx context.Context, addr, greeting, node string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot answer its health check: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if greeting == "" {
			http.Error(w, "no greeting is configured on "+node, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	go func() { <-ctx.Done(); srv.Close() }()
	return nil
}

// readGreeting reads "greeting = X" from the config the mesh wrote.
func readGreeting(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read its config: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "greeting" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New(path + " has no greeting line")
}

// count adds one to a counter in the state bucket.
func count(ctx context.Context, kv *meshmod.State, key string) {
	for range 5 {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err = kv.Create(ctx, key, []byte("1")); err == nil {
				return
			}
		case err == nil:
			n, _ := strconv.Atoi(string(e.Value()))
			if _, err = kv.Update(ctx, key, []byte(strconv.Itoa(n+1)), e.Revision()); err == nil {
				return
			}
		}
	}
}

func report(err error) {
	if err != nil {
		log.Print(err)
	}
}
