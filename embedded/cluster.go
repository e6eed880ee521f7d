package embedded

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"
)

// StartCluster starts n servers in one NATS cluster, each with JetStream in
// dir/<name>, and returns once every one of them reports healthy.
// JetStream clustering refuses to start without configured routes, so the
// cluster ports are chosen before any server starts and every server is given
// the same full route list (a server ignores the route to itself).
func StartCluster(ctx context.Context, dir string, n int) ([]*Server, error) {
	return StartClosedCluster(ctx, dir, n, nil)
}

// StartClosedCluster is StartCluster with every server closed by auth (nil:
// open), as an operator configures a cluster for a closed mesh.
func StartClosedCluster(ctx context.Context, dir string, n int, auth *Auth) ([]*Server, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var servers []*Server
	for i := range n {
		name := fmt.Sprintf("s%d", i+1)
		s, err := Start(ctx, Options{
			Dir: filepath.Join(dir, name), Port: -1, ServerName: name,
			// A listener, not DontListen: routes never start without one.
			Cluster: &Cluster{Name: "mesh-test", Host: "127.0.0.1", Port: ports[i], Routes: routes},
			Auth:    auth,
		})
		if err != nil {
			closeAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	// ReadyForConnections is not "JetStream ready": until every server's
	// healthz says ok, stream requests can go unanswered.
	for _, s := range servers {
		if err := s.WaitHealthy(ctx, 30*time.Second); err != nil {
			closeAll(servers)
			return nil, err
		}
	}
	return servers, nil
}

func closeAll(servers []*Server) {
	for _, s := range servers {
		s.Close()
	}
}

// freePorts asks the kernel for n unused loopback ports. Another process could
// take one before the cluster binds it; in a test that shows as a start error,
// never as a wrong result.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("embedded: cannot find a free port for the cluster: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
