package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nkeys"
)

// reportKeyFile holds, in the agent's state directory, the key it signs its
// reports with: made by the agent on its first start and never sent
// anywhere, so a report that verifies against it is this node's word and
// nobody else's, the controller's included (rule 20).
const reportKeyFile = "report.nk"

// loadSealing reads (or makes) the report key, and derives from the join
// string's node seed the MAC key of reports and the key that opens what
// declarations carry sealed to this node (only this node, and the
// controller that derived the seed, can compute either).
func loadSealing(dir string, j Join) (store.Sealing, []byte, error) {
	bus, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return store.Sealing{}, nil, errors.New("agent: the join string has no usable node key; copy it again from mesh node join " + j.Node)
	}
	mac, err := declaration.ReportMACKey(bus)
	if err != nil {
		return store.Sealing{}, nil, err
	}
	seal, err := declaration.SealKey(bus)
	if err != nil {
		return store.Sealing{}, nil, err
	}
	kp, err := reportKey(filepath.Join(dir, reportKeyFile))
	if err != nil {
		return store.Sealing{}, nil, err
	}
	signer, err := declaration.NewSigner(kp)
	if err != nil {
		return store.Sealing{}, nil, err
	}
	return store.Sealing{Signer: signer, MAC: mac}, seal, nil
}

func reportKey(path string) (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createReportKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: cannot read its report key: %w", err)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("agent: its report key %s is damaged (%v); move it aside and the agent makes and records a new one", path, err)
	}
	return kp, nil
}

func createReportKey(path string) (nkeys.KeyPair, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("agent: cannot make a report key: %w", err)
	}
	err = declaration.WriteNewKey(path, kp)
	if errors.Is(err, fs.ErrExist) {
		return reportKey(path) // another start made it meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("agent: cannot write its report key: %w", err)
	}
	return kp, syncDir(filepath.Dir(path))
}

// recordKey records the report key at every start, before any report: the
// log may have lost the record (an older backup restored), and recording
// the same key again changes nothing. Kept to send later, like any report,
// when the bus is away. Each recording is its own act under its own id (a
// resend of a kept one keeps its id): under one fixed id, a start minutes
// after the last stored a second message under an id the first already
// had, and a restore that republished both inside the duplicates window
// lost the second (store.RestoredIDHeader says how restores cope now).
func (a *Agent) recordKey(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recordKeyLocked(ctx)
}

func (a *Agent) recordKeyLocked(ctx context.Context) {
	key := a.sealing.Signer.PublicKey()
	ev := events.ReportKeyRecorded{Node: a.cfg.Join.Node, Key: key}
	for _, p := range a.state.Pending {
		if p.Type == ev.EventType() {
			return // already waiting to go, ahead of the reports after it
		}
	}
	a.send(ctx, reportID("k", 0, key), ev)
}
