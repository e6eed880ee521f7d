package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/web"
)

// httpFlag is the controller's HTTP listener: metrics, health, the page.
// Off loopback it must speak TLS and ask the operator's token (issue 29):
// what it serves names every node and failure of the mesh, and a listener
// in clear without a credential gave it to anyone on the network.
type httpFlag struct {
	HTTP     string   `name:"http" env:"MESH_HTTP" default:"127.0.0.1:4280" help:"Where to serve /metrics, /healthz, /readyz and the live status page (host:port; loopback by default), or 'off'. Off loopback it needs --http-cert and --http-key, and asks the operator's token (mesh http-token)."`
	HTTPCert string   `name:"http-cert" type:"path" help:"The HTTP listener's TLS certificate (PEM), for a --http other machines reach."`
	HTTPKey  string   `name:"http-key" type:"path" help:"The key of --http-cert (PEM)."`
	HTTPHost []string `name:"http-host" help:"A name the HTTP listener is reached by (repeatable): a request naming another is refused, against DNS rebinding. IP addresses and localhost always pass."`
}

// options checks the flags and reads the certificate, before anything
// starts: a bad flag is one sentence and exit 2, not a controller that
// started and stopped.
func (f httpFlag) options() (web.Options, error) {
	o := web.Options{Addr: f.HTTP, Hosts: f.HTTPHost}
	if f.HTTP == "off" {
		return o, nil
	}
	host, _, err := net.SplitHostPort(f.HTTP)
	if err != nil {
		return o, cmdline.Usagef("--http %s is not host:port (such as 127.0.0.1:4280), nor off", f.HTTP)
	}
	if (f.HTTPCert == "") != (f.HTTPKey == "") {
		return o, cmdline.Usagef("--http-cert and --http-key go together: give both, or neither")
	}
	if f.HTTPCert == "" {
		if !Loopback(host) {
			return o, cmdline.Usagef("--http %s reaches other machines, and the page, /metrics and /readyz name every node and failure of the mesh: give --http-cert and --http-key (the listener then asks the operator's token, mesh http-token), or listen on loopback", f.HTTP)
		}
		return o, nil
	}
	cert, err := tls.LoadX509KeyPair(f.HTTPCert, f.HTTPKey)
	if err != nil {
		return o, cmdline.Usagef("--http-cert %s and --http-key %s are not a certificate and its key: %v", f.HTTPCert, f.HTTPKey, err)
	}
	o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return o, nil
}

// start starts the listener unless it is off; stop is never nil. Off
// Loopback it asks the operator's token, which the controller derives.
func (f httpFlag) start(ctrl *commands.Controller, m *web.Metrics, log *slog.Logger) (stop func(), err error) {
	o, err := f.options()
	if err != nil {
		return nil, err
	}
	if f.HTTP == "off" {
		log.Info("no HTTP listener (--http off): no metrics, health or status page")
		return func() {}, nil
	}
	host, _, _ := net.SplitHostPort(f.HTTP)
	if !Loopback(host) {
		if o.Token, err = busauth.ControllerHTTPToken(ctrl.Core.Key); err != nil {
			return nil, err
		}
	}
	s, err := web.Start(o, ctrl, m, log)
	if err != nil {
		return nil, err
	}
	scheme, auth := "http", "none: loopback"
	if o.TLS != nil {
		scheme = "https"
	}
	if o.Token != "" {
		auth = "the operator's token (mesh http-token)"
	}
	log.Info("status page, /metrics, /healthz and /readyz", "url", scheme+"://"+s.Addr+"/", "credential", auth)
	return func() { s.Close() }, nil
}

// HTTPTokenCmd prints the operator's token on the HTTP listener.
type HTTPTokenCmd struct{}

func (c *HTTPTokenCmd) Help() string {
	return `It is derived from the operator's key in the home (operator.nk, or the controller key beside
it): whoever holds that key can make it, and the controller checks it without storing anything.
Examples:
  curl -H "Authorization: Bearer $(mesh http-token)" https://mesh-1:4280/api/status
  open https://mesh-1:4280/?token=TOKEN   # once: the browser keeps it in a cookie`
}

func (c *HTTPTokenCmd) Run(g *cmdline.Globals, out *cmdline.Output) error {
	token, err := busauth.HomeHTTPToken(g.Home)
	if err != nil {
		key, kerr := busauth.HomeKey(g.Home, false)
		if kerr != nil {
			return err
		}
		if token, err = busauth.ControllerHTTPToken(key); err != nil {
			return err
		}
	}
	fmt.Fprintln(out.Out, token)
	return nil
}
