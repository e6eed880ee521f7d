// Package web is the controller's HTTP listener (issue 16): Prometheus
// metrics, health and readiness, and the live status page. It only reads:
// what it shows is what the verbs answer (the page's JSON is exactly
// status --json), and it writes nothing.
package web

import (
	"bufio"
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/wire"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed page
var page embed.FS

// Server is the listener, running.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	Addr string // where it listens, host:port
}

// Options are where and how the listener serves.
type Options struct {
	Addr string // host:port
	// TLS, when set, is the certificate it serves (what off loopback
	// must have: cmd/mesh refuses such an address without one).
	TLS *tls.Config
	// Token, when set, is the bearer token every request but /healthz
	// must carry (guard.go).
	Token string
	// Hosts are the names it is reached by, beside IP literals and
	// localhost: a request naming another Host is refused.
	Hosts []string
}

// Start listens on o.Addr and serves until Close. m is the registry the
// controller was started with (ControllerConfig.Metrics).
func Start(o Options, ctrl *commands.Controller, m *Metrics, log *slog.Logger) (*Server, error) {
	addr := o.Addr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for HTTP on %s: %w; choose another --http address, or --http off", addr, err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	h := ctrl
	m.reg.MustRegister(mesh{h: h})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogLogger{log}}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok: the controller's process lives") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { ready(w, r, h) })
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		// ?brief: the nodes as the page shows them (a table by column,
		// no digests), which it asks for every second: at 100,000 nodes
		// the whole answer cost the controller about twice the CPU.
		// ?details_once: its table's details each once (a page of this
		// version's; one open from before reads a detail a row).
		brief, once := r.URL.Query().Has("brief"), r.URL.Query().Has("details_once")
		answer(w, r, func(ctx context.Context) (any, error) {
			return h.Status.Status(ctx, wire.StatusRequest{Brief: brief, DetailsOnce: once})
		})
	})
	mux.HandleFunc("GET /api/node/{name}", func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, func(ctx context.Context) (any, error) { return nodePage(ctx, h, r.PathValue("name")) })
	})
	static, _ := fs.Sub(page, "page")
	files := http.FileServerFS(static)
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /node/{name}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "node.html")
	})
	s := &Server{ln: ln, Addr: ln.Addr().String(), srv: &http.Server{Handler: guard(mux, o.Token, o.Hosts), ReadHeaderTimeout: 10 * time.Second}}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops listening and waits for answers in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// ready answers 200 when the read models hold the whole stream and the
// bus answers, else 503 with why: what a load balancer or an orchestrator
// asks before sending the controller work.
func ready(w http.ResponseWriter, r *http.Request, h *commands.Controller) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	p, err := h.Status.ProjectionsStatus(ctx, wire.Empty{})
	switch {
	case err != nil:
		http.Error(w, "not ready: the bus does not answer: "+err.Error(), http.StatusServiceUnavailable)
	case p.Failure != "":
		http.Error(w, "not ready: the read models stopped: "+p.Failure, http.StatusServiceUnavailable)
	case p.Lag > 0:
		http.Error(w, fmt.Sprintf("not ready: the read models are %d event(s) behind the stream", p.Lag), http.StatusServiceUnavailable)
	default:
		fmt.Fprintf(w, "ready: folded up to event %d of %d\n", p.Checkpoint, p.StreamLast)
	}
}

// answer writes what fn answers as JSON, or its error with the status its
// kind maps to.
func answer(w http.ResponseWriter, r *http.Request, fn func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	v, err := fn(ctx)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, aggregates.ErrUnknownNode) || errors.Is(err, aggregates.ErrInvalid) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// A status's nodes written one at a time (wire.Listed): at 100,000
	// nodes its JSON encoded whole was held several times over.
	if l, ok := v.(wire.Listed); ok {
		bw := bufio.NewWriter(w)
		if wire.WriteListed(bw, l) == nil {
			bw.WriteString("\n")
			bw.Flush()
		}
		return
	}
	json.NewEncoder(w).Encode(v)
}

// NodePage is what a node's page shows: node show, and its history.
type NodePage struct {
	Node    wire.NodeView `json:"node"`
	History wire.History  `json:"history"`
}

func nodePage(ctx context.Context, h *commands.Controller, name string) (NodePage, error) {
	n, err := h.Status.ShowNode(ctx, wire.NameRequest{Name: name})
	if err != nil {
		return NodePage{}, err
	}
	hist, err := h.History.History(ctx, wire.HistoryRequest{Node: name, Diff: true})
	return NodePage{Node: n, History: hist}, err
}

// slogLogger lets promhttp say its errors in the controller's log.
type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Println(v ...any) { l.log.Warn("metrics", "err", fmt.Sprint(v...)) }
