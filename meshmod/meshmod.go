// Package meshmod is what a module's program uses to take its place on the
// mesh's bus (issue 15). The node's agent starts the program with its
// identity in the environment (agent/identity.go); Connect reads it and
// connects as that module, which the controller lets do exactly what its
// manifest says: serve what it provides, ask for what it consumes, keep
// its state in its own bucket, and report its own standing as a provider.
package meshmod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Module is a running module connected as itself.
type Module struct {
	NC           *nats.Conn
	Node, Module string
	Root         string // the node's root: declared paths land under it
	state        string // its module's state bucket
	prefix       string // the keys of it this instance owns
	st           *store.Store
	sealing      store.Sealing
}

// Connect joins the bus as the module the agent started. Outside an agent
// (no MESH_NODE), it says so.
func Connect(opts ...nats.Option) (*Module, error) {
	m := &Module{Node: os.Getenv("MESH_NODE"), Module: os.Getenv("MESH_MODULE"), Root: os.Getenv("MESH_ROOT"), state: os.Getenv("MESH_STATE"), prefix: os.Getenv("MESH_STATE_PREFIX")}
	url := os.Getenv("MESH_NATS_URL")
	if m.Node == "" || m.Module == "" || url == "" {
		return nil, errors.New("meshmod: MESH_NODE, MESH_MODULE and MESH_NATS_URL are not set: this program is meant to be started by a mesh agent, as a module's run")
	}
	if m.prefix == "" {
		// An agent from before state was kept per node: its keys are
		// still its node's.
		m.prefix = events.StatePrefix(m.Node)
	}
	opts = append([]nats.Option{nats.Name("mesh module " + m.Module + " on " + m.Node), nats.MaxReconnects(-1)}, opts...)
	if ca := os.Getenv("MESH_TLS_CA"); ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	if file := os.Getenv("MESH_NKEY"); file != "" {
		seed, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("meshmod: cannot read the module's key: %w", err)
		}
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("meshmod: the module's key in %s is damaged: %w", file, err)
		}
		pub, _ := kp.PublicKey()
		// MESH_VOUCHER: on a node that made its own keys (issue 29), its
		// agent's word that this key is this module's there, which the
		// bus and the fold check against the node's recorded bus key.
		voucher := os.Getenv("MESH_VOUCHER")
		opts = append(opts, nats.Nkey(pub, kp.Sign), nats.UserInfo(os.Getenv("MESH_USER"), voucher), nats.CustomInboxPrefix(os.Getenv("MESH_INBOX")))
		signer, err := declaration.NewSigner(kp)
		if err != nil {
			return nil, err
		}
		mac, err := declaration.ReportMACKey(kp)
		if err != nil {
			return nil, err
		}
		m.sealing = store.Sealing{Signer: signer, MAC: mac, Voucher: voucher}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("meshmod: cannot reach the bus at %s as %s on %s: %w", url, m.Module, m.Node, err)
	}
	m.NC = nc
	if m.st, err = store.AttachNode(nc, ""); err != nil {
		nc.Close()
		return nil, err
	}
	return m, nil
}

// Close leaves the bus.
func (m *Module) Close() { m.NC.Close() }

// Failing reports that this module, on this node, keeps failing consumer:
// status names it until Recovered. (Only for itself: the fold sets aside
// a standing this identity writes for another provider.)
func (m *Module) Failing(ctx context.Context, consumer, word string) error {
	return m.standing(ctx, events.ProviderFailing{Provider: m.Module, Machine: m.Node, Consumer: consumer, Word: word})
}

// Recovered reports that this module serves consumer again.
func (m *Module) Recovered(ctx context.Context, consumer string) error {
	return m.standing(ctx, events.ProviderRecovered{Provider: m.Module, Machine: m.Node, Consumer: consumer})
}

func (m *Module) standing(ctx context.Context, ev events.Event) error {
	if m.sealing.Signer == nil {
		return errors.New("meshmod: this module has no key (an open bus): its standing cannot be proved its own")
	}
	id := fmt.Sprintf("std.%s.%d", m.Module, time.Now().UnixNano())
	_, err := m.st.Report(ctx, m.Node, id, ev, m.sealing)
	return err
}

// State is this instance's own state: the keys of its module's bucket
// under its node's prefix, which it alone may read and write (its module's
// instances on other nodes keep theirs in the same bucket, out of its
// reach).
func (m *Module) State(ctx context.Context) (*State, error) {
	js, err := jetstream.New(m.NC)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, m.state)
	if err != nil {
		return nil, err
	}
	return &State{KV: kv, Prefix: m.prefix}, nil
}
