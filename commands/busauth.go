package commands

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Rule 18, a node only hears its own: on a closed bus (mesh up's), every
// connection but the controller's own is decided by the controller, through
// the bus's auth callout. A node proves its identity with an nkey derived
// from the controller key and its name, so the controller can check it
// without keeping a secret per node, and prints it again in the node's join
// string at any time. It may read its own declarations and publish its own
// reports, nothing else; the operator's key, derived the same way, may do
// anything. Anything else is refused at connect.

// AuthSubject is where the bus asks who a connection is.
const AuthSubject = "$SYS.REQ.USER.AUTH"

// OperatorKeyFile holds, in the home, the operator's identity on a closed
// bus: what the command line (and the nats CLI, with --nkey) connects with.
const OperatorKeyFile = "operator.nk"

// NodeKey is node's identity on a closed bus. Derived, not random: a
// controller restored from a backup of its key recognises every node's
// join string, and so does a second controller sharing the key.
func NodeKey(controller nkeys.KeyPair, node string) (nkeys.KeyPair, error) {
	return declaration.DeriveKey(controller, declaration.NodeLabel(node), nkeys.PrefixByteUser)
}

// OperatorKey is the operator's identity on a closed bus.
func OperatorKey(controller nkeys.KeyPair) (nkeys.KeyPair, error) {
	return declaration.DeriveKey(controller, "operator", nkeys.PrefixByteUser)
}

// NodePermissions is all a node's identity may do on the bus. A denied
// publish is dropped without a word and a JetStream call then times out,
// so the agent is built to need exactly these (ARCHITECTURE.md, "Who may
// say what").
func NodePermissions(node string) jwt.Permissions {
	own := events.DeclarationSubject(node)
	pub := jwt.StringList{
		// Its newest declaration, by subject: a direct get names the
		// subject in its own, so no other can be asked for.
		"$JS.API.DIRECT.GET." + events.Stream + "." + own,
	}
	// Its reports, each type on its own subject (rule 19): nothing else
	// under its prefix, and nothing under another node's.
	for _, typ := range events.ReportTypes() {
		pub = append(pub, events.ReportSubject(node, typ))
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		// The publish of its own declarations, which wakes the agent (the
		// declaration itself it reads by direct get), and answers on its
		// own inboxes only: _INBOX.> would let it read every reply on the
		// bus, the operator's included. No consumer at all: a consumer is
		// named, and a name can be guessed or listed by another.
		Sub: jwt.Permission{Allow: jwt.StringList{own, events.NodeInbox(node) + ".>"}},
	}
}

// OperatorPermissions is what the operator's identity may do: ask the
// controller anything, read the stream (information, direct gets, consumers
// for mesh events and backup), but never write it (rule 19): only the
// controller appends, and the stream itself is not the operator's to
// reshape or remove. The same holds of the secrets stream: the operator
// reads the salts (a backup carries them; a salt opens nothing without the
// controller key) and never writes or erases one, since erasing is
// forgetting, which is recorded (mesh secret forget) or not done. (A reply subject aimed into the stream is not a
// permission the bus can refuse; the fold sets such a message aside.)
func OperatorPermissions() jwt.Permissions {
	api := "$JS.API.STREAM."
	deny := jwt.StringList{events.SubjectsEvents, events.SubjectsReports, secretSubject + ">"}
	for _, stream := range []string{events.Stream, SecretsStream} {
		for _, verb := range []string{"CREATE", "UPDATE", "DELETE", "PURGE", "RESTORE", "MSG.DELETE"} {
			deny = append(deny, api+verb+"."+stream)
		}
	}
	return jwt.Permissions{Pub: jwt.Permission{Deny: deny}}
}

// DefaultLifetime is how long a connection's permissions last on a closed
// bus. The bus then closes it, the client connects again, and the
// controller decides again: a retired node is out within this time.
const DefaultLifetime = 10 * time.Minute

// authCallout answers the bus's questions about connections.
type authCallout struct {
	h        *Handlers
	issuer   nkeys.KeyPair
	operator string // the operator's public key
	lifetime time.Duration
	log      *slog.Logger
	// refused is when each refusal (host and reason) was last logged: an
	// agent left running for a retired node asks again every 2 seconds,
	// and its refusal is worth a line a minute, not thirty.
	mu      sync.Mutex
	refused map[string]time.Time
}

// ServeAuth answers the auth callout of a closed bus on nc, signing with
// issuer (the key the bus was configured with), granting each connection
// lifetime (DefaultLifetime when 0), until the subscription ends.
func ServeAuth(nc *nats.Conn, h *Handlers, issuer nkeys.KeyPair, lifetime time.Duration) (*nats.Subscription, error) {
	op, err := OperatorKey(h.Key)
	if err != nil {
		return nil, err
	}
	opPub, _ := op.PublicKey()
	if lifetime <= 0 {
		lifetime = DefaultLifetime
	}
	c := &authCallout{h: h, issuer: issuer, operator: opPub, lifetime: lifetime, log: h.Log, refused: map[string]time.Time{}}
	sub, err := nc.Subscribe(AuthSubject, c.answer)
	if err != nil {
		return nil, fmt.Errorf("cannot answer the bus's auth callout: %w", err)
	}
	return sub, nc.Flush()
}

func (c *authCallout) answer(msg *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(msg.Data))
	if err != nil {
		c.log.Warn("the bus asked about a connection in a form this controller cannot read", "err", err)
		return
	}
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	who, perms, err := c.decide(req)
	if err != nil {
		resp.Error = err.Error()
		c.logRefusal(req.ClientInformation.Host, err)
	} else {
		uc := jwt.NewUserClaims(req.UserNkey)
		uc.Name, uc.Audience, uc.Permissions = who, "$G", perms
		if who != "operator" {
			// A node publishes only reports: none larger than one may be.
			uc.Limits.Payload = events.MaxReport
		}
		uc.Expires = time.Now().Add(c.lifetime).Unix()
		if resp.Jwt, err = uc.Encode(c.issuer); err != nil {
			resp.Jwt, resp.Error = "", "the controller cannot sign the connection's permissions"
		}
	}
	token, err := resp.Encode(c.issuer)
	if err != nil {
		c.log.Error("cannot sign an answer to the bus's auth callout", "err", err)
		return
	}
	_ = msg.Respond([]byte(token))
}

func (c *authCallout) logRefusal(host string, err error) {
	key, now := host+"\x00"+err.Error(), time.Now()
	c.mu.Lock()
	last, seen := c.refused[key]
	say := !seen || now.Sub(last) >= time.Minute
	if say {
		if len(c.refused) >= 1024 {
			clear(c.refused) // bounded: many hosts at once are logged again, not remembered for ever
		}
		c.refused[key] = now
	}
	c.mu.Unlock()
	if say {
		c.log.Info("refused a connection (said once a minute while it goes on)", "host", host, "why", err)
	}
}

var errNoIdentity = errors.New("this bus is closed: connect with a node's join string (mesh node join NAME) or with the operator key in the mesh's home")

// decide names who connects and what it may do, or why it may not.
func (c *authCallout) decide(req *jwt.AuthorizationRequestClaims) (string, jwt.Permissions, error) {
	pub := req.ConnectOptions.Nkey
	if pub == "" || !signedNonce(pub, req.ClientInformation.Nonce, req.ConnectOptions.SignedNonce) {
		return "", jwt.Permissions{}, errNoIdentity
	}
	if pub == c.operator {
		return "operator", OperatorPermissions(), nil
	}
	node := req.ConnectOptions.Username
	if node == "" {
		return "", jwt.Permissions{}, errNoIdentity
	}
	if strings.Contains(node, "/") {
		return c.moduleIdentity(pub, node)
	}
	want, err := NodeKey(c.h.Key, node)
	if err != nil {
		return "", jwt.Permissions{}, err
	}
	if wantPub, _ := want.PublicKey(); wantPub != pub {
		return "", jwt.Permissions{}, fmt.Errorf("the key presented is not %s's; copy the join string again from mesh node join %s", node, node)
	}
	row, found, err := c.h.Proj.Node(node)
	switch {
	case err != nil:
		return "", jwt.Permissions{}, err
	case !found:
		return "", jwt.Permissions{}, fmt.Errorf("%s is not enrolled in this mesh", node)
	case row.Retired:
		return "", jwt.Permissions{}, fmt.Errorf("%s is retired; enrol it again to bring it back", node)
	}
	return node, NodePermissions(node), nil
}

// signedNonce checks that the client signed the server's nonce with pub.
func signedNonce(pub, nonce, sig string) bool {
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil || nonce == "" {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	return kp.Verify([]byte(nonce), raw) == nil
}

// BusKeys are what a closed bus is started with: the issuer of the callout's
// answers and the controller's own user. Made afresh at each start: only
// the controller holds them, and nothing outside the process needs them.
type BusKeys struct {
	Issuer, Controller nkeys.KeyPair
}

// NewBusKeys makes a closed bus's keys.
func NewBusKeys() (BusKeys, error) {
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		return BusKeys{}, err
	}
	user, err := nkeys.CreateUser()
	return BusKeys{Issuer: issuer, Controller: user}, err
}

// ClusterBusKeys are a closed cluster's keys: derived from the controller
// key, because the cluster's configuration names them and outlives any one
// start of the controller (mesh bus-config prints that configuration).
func ClusterBusKeys(controller nkeys.KeyPair) (BusKeys, error) {
	issuer, err := declaration.DeriveKey(controller, "callout issuer", nkeys.PrefixByteAccount)
	if err != nil {
		return BusKeys{}, err
	}
	user, err := declaration.DeriveKey(controller, "controller user", nkeys.PrefixByteUser)
	return BusKeys{Issuer: issuer, Controller: user}, err
}

// ServerConfig is the authorization block of a nats-server configuration
// that closes a bus with these keys: the controller's user may do anything
// and answers the callout; every other connection is the controller's to
// decide.
func (k BusKeys) ServerConfig() string {
	issuer, controller := k.Public()
	return fmt.Sprintf(`authorization {
  users: [ { nkey: %s } ]
  auth_callout {
    issuer: %s
    auth_users: [ %s ]
  }
}
`, controller, issuer, controller)
}

// Public is what a server closed for these keys is configured with: the
// account key the callout's answers are signed with, and the controller's
// user key, which connects without the callout. (An embedded server takes
// them as embedded.Auth; the controller itself never needs the server.)
func (k BusKeys) Public() (issuer, controller string) {
	issuer, _ = k.Issuer.PublicKey()
	controller, _ = k.Controller.PublicKey()
	return issuer, controller
}

// ControllerOption connects as the controller's own user.
func (k BusKeys) ControllerOption() nats.Option {
	user, _ := k.Controller.PublicKey()
	return nats.Nkey(user, k.Controller.Sign)
}

// WriteOperatorKey writes the operator's key into home, mode 0600, replacing
// what is there: it is derived, so it is the same key each time.
func WriteOperatorKey(home string, controller nkeys.KeyPair) error {
	op, err := OperatorKey(controller)
	if err != nil {
		return err
	}
	seed, err := op.Seed()
	if err != nil {
		return err
	}
	path := filepath.Join(home, OperatorKeyFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, seed, 0o600); err != nil {
		return fmt.Errorf("cannot write the operator key %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// OperatorOptions connect with the operator key in home, if there is one:
// a home without one belongs to an open bus, which asks for nothing.
func OperatorOptions(home string) ([]nats.Option, error) {
	path := filepath.Join(home, OperatorKeyFile)
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the operator key: %w", err)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("the operator key %s is not an nkeys seed: %v; mesh up writes it again", path, err)
	}
	pub, _ := kp.PublicKey()
	return []nats.Option{nats.Nkey(pub, kp.Sign)}, nil
}
