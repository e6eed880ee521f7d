package agent

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/secret"
	"github.com/nats-io/nkeys"
)

// reportKeyFile holds, in the agent's state directory, the key it signs its
// reports with: made by the agent on its first start and never sent
// anywhere, so a report that verifies against it is this node's word and
// nobody else's, the controller's included (rule 20).
const reportKeyFile = "report.nk"

// loadSealing reads (or makes) the report key, and derives from the node
// seed the MAC key of reports and the keys that open what declarations
// carry sealed to this node. A node that made its own seed (issue 29) is
// the only holder of either; a node enrolled before shares them with the
// controller that derived its seed.
func loadSealing(dir string, j Join) (store.Sealing, opener, error) {
	bus, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return store.Sealing{}, opener{}, errors.New("agent: it has no usable node key; enrol it again with a token from mesh node join " + j.Node)
	}
	mac, err := declaration.ReportMACKey(bus)
	if err != nil {
		return store.Sealing{}, opener{}, err
	}
	var o opener
	if o.derived, err = declaration.SealKey(bus); err != nil {
		return store.Sealing{}, opener{}, err
	}
	if j.own {
		if o.curve, err = declaration.SealCurve(bus); err != nil {
			return store.Sealing{}, opener{}, err
		}
		if o.overlay, _, err = declaration.OverlayKey(bus); err != nil {
			return store.Sealing{}, opener{}, err
		}
	}
	path := filepath.Join(dir, reportKeyFile)
	if _, err := os.Stat(path); j.own && errors.Is(err, fs.ErrNotExist) {
		// Its enrolment recorded the report key it made; a new one would
		// be set aside with every report it signs (only a re-key records
		// another), and the node would wait for ever, its reports unheard.
		return store.Sealing{}, opener{}, fmt.Errorf("agent: %s enrolled its report key, and %s is gone; the machine must be re-keyed: mesh node rekey %s, then start the agent with that join string and a fresh state directory", j.Node, path, j.Node)
	}
	kp, err := reportKey(path)
	if err != nil {
		return store.Sealing{}, opener{}, err
	}
	signer, err := declaration.NewSigner(kp)
	if err != nil {
		return store.Sealing{}, opener{}, err
	}
	return store.Sealing{Signer: signer, MAC: mac}, o, nil
}

// opener opens what a declaration carries sealed to this node.
type opener struct {
	derived []byte           // the key derived from the seed, shared with the controller (enrolled before issue 29)
	curve   *ecdh.PrivateKey // the X25519 key of a node that made its keys
	overlay string           // its private overlay key, written where the placeholder stands
}

// open opens a file's box to this node: its content, or (for a file that
// printed secret settings) the inner box its content key opens.
func (o opener) open(node, path, box string) ([]byte, error) {
	return o.openAt(secret.FilePlace(node, path), box)
}

// openKey opens a content key the controller sealed to this node.
func (o opener) openKey(node, path, box string) ([]byte, error) {
	return o.openAt(secret.ContentKeyPlace(node, path), box)
}

func (o opener) openAt(where, box string) ([]byte, error) {
	if !secret.IsSealedTo(box) {
		return secret.Open(o.derived, where, box)
	}
	if o.curve == nil {
		return nil, secret.ErrOpen
	}
	return secret.OpenWith(o.curve, where, box)
}

// fill puts the node's private overlay key where its declaration holds the
// placeholder: only a node that made its keys has one, and its declaration
// only the placeholder (composeSecrets.OverlayKey).
func (o opener) fill(content []byte) []byte {
	if o.curve == nil {
		return content
	}
	return bytes.ReplaceAll(content, []byte(declaration.OverlayPlaceholder), []byte(o.overlay))
}

func reportKey(path string) (nkeys.KeyPair, error) {
	return ownKey(path, "report key", "move it aside and the agent makes and records a new one")
}

// ownKey reads a key the agent keeps in its state (what it is, for the
// messages; remedy, for a damaged one), making it on the first start.
// O_EXCL in WriteNewKey: two starts at once keep the one written first.
func ownKey(path, what, remedy string) (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("agent: cannot make its %s: %w", what, err)
		}
		err = declaration.WriteNewKey(path, kp)
		if errors.Is(err, fs.ErrExist) {
			return ownKey(path, what, remedy) // another start made it meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("agent: cannot write its %s: %w", what, err)
		}
		return kp, syncDir(filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("agent: cannot read its %s: %w", what, err)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("agent: its %s %s is damaged (%v); %s", what, path, err, remedy)
	}
	return kp, nil
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
	if a.cfg.Join.own {
		// It enrolled its keys, this one among them (issue 29): the log
		// has it, and a record of its own would be set aside as foreign.
		return
	}
	key := a.sealing.Signer.PublicKey()
	ev := events.ReportKeyRecorded{Node: a.cfg.Join.Node, Key: key}
	for _, p := range a.state.Pending {
		if p.Type == ev.EventType() {
			return // already waiting to go, ahead of the reports after it
		}
	}
	a.send(ctx, reportID("k", 0, key), ev)
}
