package busauth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// AuthSubject is where the bus asks who a connection is.
const AuthSubject = "$SYS.REQ.USER.AUTH"

// Directory is what the callout asks of the mesh's read models. Each
// answer is read when a connection is decided, so an enrolment, a
// retirement or an assignment counts from the next connection on; the
// controller ends the connections whose grant the log takes away, so that
// next connection comes at once (cut.go).
type Directory interface {
	// ActiveNode is nil for an enrolled node that is not retired, or why
	// the node may not connect, in one sentence.
	ActiveNode(node string) error
	// ModuleKey is the public key module's instance on node connects with,
	// for a node enrolled before nodes made their own keys.
	ModuleKey(node, module string) string
	// NodeBus is the bus key node's agent made and enrolled with (own
	// true), or own false: the node's key derives from the controller's.
	NodeBus(node string) (bus string, own bool, err error)
	// Enrolling is nil when token ("ID.SECRET") may enrol (or re-key) node
	// now, or why not, in one sentence.
	Enrolling(node, token string) error
	// RunningModule is the manifest of the build of module assigned to
	// node, which runs, and the seats that instance holds now; or why it
	// may not connect.
	RunningModule(node, module string) (manifest.Manifest, []string, error)
	// Operator is the operator in the mesh (added, not removed) whose key
	// is key, and its role; ok false when none is.
	Operator(key string) (name string, role events.Role, ok bool)
	// OperatorNamed says whether name is an operator in the mesh now.
	OperatorNamed(name string) bool
}

// Callout is what the controller answers the bus's auth callout with.
type Callout struct {
	Directory  Directory
	Controller nkeys.KeyPair // the controller key: nodes' and the first admin's keys derive from it
	Issuer     nkeys.KeyPair // signs the answers: the key the bus was configured with
	Lifetime   time.Duration // how long a connection's permissions last (DefaultLifetime when 0)
	Log        *slog.Logger
}

// authCallout answers the bus's questions about connections.
type authCallout struct {
	Callout
	system string // the controller's system identity's public key
	// refused is when each refusal (host and reason) was last logged: an
	// agent left running for a retired node asks again every 2 seconds,
	// and its refusal is worth a line a minute, not thirty.
	mu      sync.Mutex
	refused map[string]time.Time
}

// Serve answers the auth callout of a closed bus on nc as c says, until
// the subscription ends.
func Serve(nc *nats.Conn, c Callout) (*nats.Subscription, error) {
	sys, err := SystemKey(c.Controller)
	if err != nil {
		return nil, err
	}
	sysPub, _ := sys.PublicKey()
	if c.Lifetime <= 0 {
		c.Lifetime = DefaultLifetime
	}
	a := &authCallout{Callout: c, system: sysPub, refused: map[string]time.Time{}}
	sub, err := nc.Subscribe(AuthSubject, a.answer)
	if err != nil {
		return nil, fmt.Errorf("cannot answer the bus's auth callout: %w", err)
	}
	return sub, nc.Flush()
}

func (c *authCallout) answer(msg *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(msg.Data))
	if err != nil {
		c.Log.Warn("the bus asked about a connection in a form this controller cannot read", "err", err)
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
		if who == SystemUser {
			// The one identity placed in the system account: the
			// controller's own, to end connections (cut.go).
			uc.Audience = systemAccount
		} else if _, op := OperatorOf(who); !op {
			// A node publishes only reports: none larger than one may be.
			uc.Limits.Payload = events.MaxReport
			// Subscriptions cost the bus memory for as long as they last;
			// the server holds each connection to this (and to Payload;
			// it enforces no Data limit for a user: issue 29).
			uc.Limits.Subs = maxSubs(who)
		}
		lifetime := spread(c.Lifetime)
		if strings.HasPrefix(who, enrolling) {
			// Long enough to ask once and hear the answer; the agent
			// then connects again with the keys it enrolled.
			lifetime = min(lifetime, EnrolLifetime)
		}
		uc.Expires = time.Now().Add(lifetime).Unix()
		if resp.Jwt, err = uc.Encode(c.Issuer); err != nil {
			resp.Jwt, resp.Error = "", "the controller cannot sign the connection's permissions"
		}
	}
	token, err := resp.Encode(c.Issuer)
	if err != nil {
		c.Log.Error("cannot sign an answer to the bus's auth callout", "err", err)
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
		c.Log.Info("refused a connection (said once a minute while it goes on)", "host", host, "why", err)
	}
}

// maxSubs bounds the subscriptions of a node's or a module's connection. An
// agent holds two or three (its declaration's subject, its inbox, a read in
// flight); a module one per service it provides or consumes, its inbox, and
// a watch or two of its state bucket. A hundred and a thousand leave room
// for any of them, and not for a connection that subscribes without end.
func maxSubs(who string) int64 {
	if strings.Contains(who, "/") {
		return 1_000
	}
	return 100
}

var errNoIdentity = errors.New("this bus is closed: connect with a node's join string (mesh node join NAME) or an operator's key (mesh operator add; a removed operator's key is refused)")

// decide names who connects and what it may do, or why it may not.
func (c *authCallout) decide(req *jwt.AuthorizationRequestClaims) (string, jwt.Permissions, error) {
	pub := req.ConnectOptions.Nkey
	if pub == "" || !signedNonce(pub, req.ClientInformation.Nonce, req.ConnectOptions.SignedNonce) {
		return "", jwt.Permissions{}, errNoIdentity
	}
	if pub == c.system {
		return SystemUser, SystemPermissions(), nil
	}
	node := req.ConnectOptions.Username
	if node == "" {
		// An operator names no user: it is found by its key alone, so it
		// cannot pass for another. A node always names itself, and is
		// never looked for here (a fleet's connects ask nothing more).
		if name, role, ok := c.Directory.Operator(pub); ok {
			return OperatorUser(name), OperatorPermissions(role, pub), nil
		}
		return "", jwt.Permissions{}, errNoIdentity
	}
	if strings.Contains(node, "/") {
		return c.moduleIdentity(pub, node, req.ConnectOptions.Password)
	}
	bus, own, err := c.Directory.NodeBus(node)
	if err != nil {
		return "", jwt.Permissions{}, err
	}
	if !own {
		// Enrolled before nodes made their own keys: its key derives
		// from the controller's, until it is re-keyed.
		want, err := NodeKey(c.Controller, node)
		if err != nil {
			return "", jwt.Permissions{}, err
		}
		bus, _ = want.PublicKey()
	}
	if bus == pub {
		if err := c.Directory.ActiveNode(node); err != nil {
			return "", jwt.Permissions{}, err
		}
		return node, NodePermissions(node), nil
	}
	if token := req.ConnectOptions.Password; token != "" {
		// An agent with keys it just made, and a token: it may ask to be
		// enrolled with them, and nothing else.
		if err := c.Directory.Enrolling(node, token); err != nil {
			return "", jwt.Permissions{}, err
		}
		return enrolling + node, EnrolPermissions(node), nil
	}
	if own {
		return "", jwt.Permissions{}, fmt.Errorf("the key presented is not the one %s's agent made and enrolled with; a new or wiped machine for %s needs mesh node rekey %s", node, node, node)
	}
	return "", jwt.Permissions{}, fmt.Errorf("the key presented is not %s's; enrol the machine with a token (mesh node join %s)", node, node)
}

// spread is a connection's lifetime: the last quarter of lifetime at
// random. A fleet's agents connect within a minute of each other (a
// started fleet, a bus restarted under them); at one lifetime each, every
// one of them was closed in the same second ten minutes later and came
// back at once, ten thousand callouts for the controller to sign in a
// burst, and an operator's command in flight then lost its connection
// with them (2026-12-05: all 10,000 agents of mesh fleet and its own
// connection closed within a second). Spread over a quarter, each
// connection's next lifetime starts at its own moment, and the bursts
// thin out for good.
func spread(lifetime time.Duration) time.Duration {
	if lifetime < 4*time.Second {
		return lifetime // a test's: the bus counts expiry in whole seconds
	}
	return lifetime - rand.N(lifetime/4)
}

// enrolling prefixes the name of a connection that may only enrol.
const enrolling = "enrolling:"

// EnrolLifetime bounds a connection that may only enrol.
const EnrolLifetime = time.Minute

// moduleIdentity decides a connection that names itself NODE/MODULE: its
// key must be that module's on that node, the node active, and the
// module assigned there in a build that runs.
func (c *authCallout) moduleIdentity(pub, user, voucher string) (string, jwt.Permissions, error) {
	node, module, _ := strings.Cut(user, "/")
	if events.ValidateName("node", node) != nil || events.ValidateName("module", module) != nil {
		return "", jwt.Permissions{}, fmt.Errorf("%q is not a node and module (NODE/MODULE)", user)
	}
	bus, own, err := c.Directory.NodeBus(node)
	switch {
	case err != nil:
		return "", jwt.Permissions{}, err
	case own && !declaration.CheckVoucher(bus, node, module, pub, voucher):
		return "", jwt.Permissions{}, fmt.Errorf("the key presented is not one %s's agent vouched for as %s; a module's key and voucher are its agent's to hand it", node, module)
	case !own && c.Directory.ModuleKey(node, module) != pub:
		return "", jwt.Permissions{}, fmt.Errorf("the key presented is not that of %s on %s; a module's key is its agent's to hand it", module, node)
	}
	m, seats, err := c.Directory.RunningModule(node, module)
	if err != nil {
		return "", jwt.Permissions{}, err
	}
	return user, ModulePermissions(node, module, m, seats...), nil
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
