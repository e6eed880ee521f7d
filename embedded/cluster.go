package embedded

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"
)

// StartCluster starts n servers in one NATS cluster, each with JetStream in
// dir/<name>, and returns once every one of them reports healthy. The first
// server is the seed the others route to; routes gossip, so the cluster stays
// whole when the seed is later stopped.
func StartCluster(ctx context.Context, dir string, n int) ([]*Server, error) {
	var servers []*Server
	fail := func(err error) ([]*Server, error) {
		for _, s := range servers {
			s.Close()
		}
		return nil, err
	}
	var seed []*url.URL
	for i := range n {
		name := fmt.Sprintf("s%d", i+1)
		s, err := Start(ctx, Options{
			Dir: filepath.Join(dir, name), Port: -1, ServerName: name,
			// A listener, not DontListen: routes never start without one.
			Cluster: &Cluster{Name: "mesh-test", Host: "127.0.0.1", Port: -1, Routes: seed},
		})
		if err != nil {
			return fail(err)
		}
		servers = append(servers, s)
		if seed == nil {
			seed = []*url.URL{{Scheme: "nats-route", Host: s.ns.ClusterAddr().String()}}
		}
	}
	for _, s := range servers {
		if err := s.WaitHealthy(ctx, 30*time.Second); err != nil {
			return fail(err)
		}
	}
	return servers, nil
}
