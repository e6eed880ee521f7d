package busauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// A connection keeps the permissions it was given at connect until it
// ends: the bus never asks again. So when the log takes a grant away (a
// node retired, a module unassigned, a seat handed over), the controller
// ends the connections that hold it, and each connects again and is
// decided from the read models as they are now (rule 18). It does so with
// the bus's own requests in its system account, which its callout lets the
// controller's system identity into: $SYS.REQ.SERVER.PING.CONNZ to find a
// user's connections on every server, $SYS.REQ.SERVER.<id>.KICK to end
// each. The same requests serve mesh up's bus and a cluster closed as mesh
// bus-config prints (its servers keep the default system account), so
// nothing is added to that configuration.

// SystemUser is the name the controller's system identity connects with:
// the one identity the callout places in the bus's system account.
const SystemUser = "mesh-system"

// systemAccount is the bus's system account, where the servers answer
// their monitoring and kick requests (nats-server's default name).
const systemAccount = "$SYS"

// systemInbox is where the system identity hears the servers' answers:
// its own prefix, so its grant needs no _INBOX.>.
const systemInbox = "_INBOX_" + SystemUser

// SystemKey is the key of the controller's system identity, derived from
// the controller key as the operator's is: only the controller has it.
func SystemKey(controller nkeys.KeyPair) (nkeys.KeyPair, error) {
	return declaration.DeriveKey(controller, "bus system user", nkeys.PrefixByteUser)
}

// SystemPermissions are all the controller's system identity may do: ask
// every server for its connections, and end one.
func SystemPermissions() jwt.Permissions {
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: jwt.StringList{"$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.SERVER.*.KICK"}},
		Sub: jwt.Permission{Allow: jwt.StringList{systemInbox + ".>"}},
	}
}

// Cutter ends live connections on a closed bus.
type Cutter struct {
	nc *nats.Conn
	// Quiet is how long a gathering of the servers' answers waits after
	// the last one for another (a cluster's size is not known to it).
	Quiet time.Duration
}

// DialCutter connects the controller's system identity the way nc is
// connected (the same servers, TLS, or in process), so it needs nothing
// nc's caller did not already give. The controller's callout must be
// answering: it decides this connection too.
func DialCutter(nc *nats.Conn, controller nkeys.KeyPair) (*Cutter, error) {
	kp, err := SystemKey(controller)
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	o := nc.Opts
	o.Name, o.User, o.Password, o.Token, o.UserJWT = "mesh controller (system)", SystemUser, "", "", nil
	o.Nkey, o.SignatureCB = pub, kp.Sign
	o.InboxPrefix = systemInbox
	o.ClosedCB, o.DisconnectedErrCB, o.ReconnectedCB, o.AsyncErrorCB, o.ConnectedCB = nil, nil, nil, nil, nil
	o.MaxReconnect = -1
	sys, err := o.Connect()
	if err != nil {
		return nil, fmt.Errorf("the controller cannot reach the bus's system account to end connections whose grant the log took away: %w", err)
	}
	return &Cutter{nc: sys, Quiet: 250 * time.Millisecond}, nil
}

// Close ends the cutter's own connection.
func (c *Cutter) Close() { c.nc.Close() }

// Conn is one live connection the bus decided by the callout.
type Conn struct {
	Server string   // the id of the server it is connected to
	CID    uint64   // its id on that server
	User   string   // the name the callout gave it (a node, NODE/MODULE, OperatorUser(name))
	Tags   []string // the tags the callout gave it (the seats a module holds)
}

// connzPage is how many connections one server lists in one answer: a
// page of a 10,000-node mesh stays far below a message's size limit.
const connzPage = 1000

// Connections lists the live connections in the mesh's account on every
// server, of user only when user is not "".
func (c *Cutter) Connections(ctx context.Context, user string) ([]Conn, error) {
	var all []Conn
	for offset := 0; ; offset += connzPage {
		req, _ := json.Marshal(map[string]any{"auth": true, "acc": "$G", "user": user, "offset": offset, "limit": connzPage})
		answers, err := c.gather(ctx, "$SYS.REQ.SERVER.PING.CONNZ", req)
		if err != nil {
			return nil, err
		}
		more := false
		for _, a := range answers {
			var r struct {
				Server struct {
					ID string `json:"id"`
				} `json:"server"`
				Data struct {
					Conns []struct {
						CID  uint64   `json:"cid"`
						User string   `json:"authorized_user"`
						Tags []string `json:"tags"`
					} `json:"connections"`
				} `json:"data"`
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(a, &r); err != nil {
				return nil, fmt.Errorf("a server answered the list of connections in a form the controller cannot read: %w", err)
			}
			if r.Error != nil {
				return nil, fmt.Errorf("a server refused to list its connections: %s", r.Error.Description)
			}
			for _, cn := range r.Data.Conns {
				all = append(all, Conn{Server: r.Server.ID, CID: cn.CID, User: cn.User, Tags: cn.Tags})
			}
			more = more || len(r.Data.Conns) == connzPage
		}
		if !more {
			return all, nil
		}
	}
}

// Cut ends every live connection of each user, on every server, and says
// how many it ended. Each connects again and is decided afresh.
func (c *Cutter) Cut(ctx context.Context, users ...string) (int, error) {
	var conns []Conn
	for _, u := range users {
		of, err := c.Connections(ctx, u)
		if err != nil {
			return 0, err
		}
		conns = append(conns, of...)
	}
	return c.kickAll(ctx, conns)
}

// CutWhere ends every live connection whose user cut says, listing them
// all: for what no one user name covers (a node and its modules).
func (c *Cutter) CutWhere(ctx context.Context, cut func(user string) bool) (int, error) {
	all, err := c.Connections(ctx, "")
	if err != nil {
		return 0, err
	}
	var conns []Conn
	for _, cn := range all {
		if cut(cn.User) {
			conns = append(conns, cn)
		}
	}
	return c.kickAll(ctx, conns)
}

// Sweep ends every live connection the directory would not give the grant
// it holds now: a node no longer active, a module no longer assigned there
// in a build that runs, and a module that claims a seat it does not hold
// (it may have held it when it connected). For a start of the controller,
// which cannot know what changed while none was running.
func (c *Cutter) Sweep(ctx context.Context, d Directory) (int, error) {
	return c.CutWhere(ctx, func(user string) bool { return Stale(d, user) })
}

// Stale says whether a connection of user may hold more than the directory
// would grant it now.
func Stale(d Directory, user string) bool {
	if name, ok := OperatorOf(user); ok {
		// Removed while no controller ran: its key no longer names it.
		return !d.OperatorNamed(name)
	}
	node, module, isModule := strings.Cut(user, "/")
	if events.ValidateName("node", node) != nil {
		return false // the operator, the controller's own users: not the mesh's to take back
	}
	if !isModule {
		return d.ActiveNode(node) != nil
	}
	m, seats, err := d.RunningModule(node, module)
	return err != nil || len(seats) < len(m.Claims)
}

func (c *Cutter) kickAll(ctx context.Context, conns []Conn) (int, error) {
	n := 0
	var errs []error
	for _, cn := range conns {
		if err := c.Kick(ctx, cn); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Kick ends one connection.
func (c *Cutter) Kick(ctx context.Context, cn Conn) error {
	req, _ := json.Marshal(map[string]uint64{"cid": cn.CID})
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := c.nc.RequestWithContext(rctx, "$SYS.REQ.SERVER."+cn.Server+".KICK", req)
	if err != nil {
		return fmt.Errorf("cannot end %s's connection %d: %w", cn.User, cn.CID, err)
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(msg.Data, &r) == nil && r.Error != nil {
		return fmt.Errorf("the bus would not end %s's connection %d: %s", cn.User, cn.CID, r.Error.Description)
	}
	return nil
}

// gather asks every server and collects their answers: until none came
// for Quiet after the last, within 5 s.
func (c *Cutter) gather(ctx context.Context, subject string, req []byte) ([][]byte, error) {
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(subject, inbox, req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var answers [][]byte
	for {
		wait, stop := ctx, context.CancelFunc(func() {})
		if len(answers) > 0 {
			wait, stop = context.WithTimeout(ctx, c.Quiet)
		}
		msg, err := sub.NextMsgWithContext(wait)
		stop()
		switch {
		case err == nil:
			answers = append(answers, msg.Data)
		case len(answers) > 0 && ctx.Err() == nil:
			return answers, nil // quiet: every server that will answer has
		default:
			return nil, fmt.Errorf("no server of the bus answered the controller's system identity (%s): %w", subject, err)
		}
	}
}
