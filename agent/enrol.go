package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Enrolment with a token (issue 29). On its first start with a join string
// that carries a token, the agent makes the node's seed in its state
// directory (declaration.NodeSeedFile, 0600, never sent), derives every
// key of the node from it, and sends their public halves with the token to
// the controller, which records them. It keeps the answer (enrolledFile),
// so a restart connects at once with its own key; the token, spent, is no
// longer needed. A state directory is one node's: a token for another name
// is refused rather than mixed into it.

// enrolledFile records, in the state directory, that its seed enrolled.
const enrolledFile = "enrolled.json"

type enrolled struct {
	Mesh string `json:"mesh"`
	Node string `json:"node"`
	Seq  uint64 `json:"seq"`
	Beat string `json:"beat"` // the MAC key of its liveness beats, base64
}

// Enrolled says whether state holds keys its agent made and enrolled: an
// agent started with it needs no token (Enrol).
func Enrolled(state string) bool {
	_, err := os.Stat(filepath.Join(state, enrolledFile))
	return err == nil
}

// StateDir is where an agent keeps its state for root, unless told.
func StateDir(root, state string) string {
	if state != "" {
		return state
	}
	return filepath.Clean(root) + ".state"
}

// Dial connects to the bus with opts added to the caller's own.
type Dial func(opts ...nats.Option) (*nats.Conn, error)

// enrolAttempts bounds how often one start asks: a controller restarting
// answers within a minute; one that refuses says why at once.
const enrolAttempts = 12

// Enrol answers j with the node's own seed in it, enrolling it first when
// this state directory has not. A join with a seed (a node enrolled before
// nodes made their keys) is answered as it is; one with neither a seed nor
// a token works only for a state directory that enrolled already.
func Enrol(ctx context.Context, j Join, state string, dial Dial, log *slog.Logger) (Join, error) {
	if j.Seed != "" {
		return j, nil
	}
	var done enrolled
	b, err := os.ReadFile(filepath.Join(state, enrolledFile))
	switch {
	case err == nil && json.Unmarshal(b, &done) == nil && (j.Node == "" || done.Node == j.Node) && done.Mesh == j.Mesh:
		bus, err := nodeSeed(filepath.Join(state, declaration.NodeSeedFile))
		if err != nil {
			return j, err
		}
		seed, _ := bus.Seed()
		j.Node, j.Seed, j.own = done.Node, string(seed), true
		j.beat = decodeBeat(done.Beat)
		return j, nil
	case err == nil:
		return j, fmt.Errorf("agent: the state directory %s is %s's of mesh %s; give this node (%s) a state directory of its own", state, done.Node, done.Mesh, j.Node)
	case !errors.Is(err, fs.ErrNotExist):
		return j, fmt.Errorf("agent: cannot read %s: %w", enrolledFile, err)
	case j.Token == "":
		return j, fmt.Errorf("agent: the state directory %s holds no enrolled keys and the join string no token; give it the join string mesh node join %s prints", state, j.Node)
	case j.Node == "":
		// A token for any name: the machine's own name, as its host.
		host, err := os.Hostname()
		if err != nil {
			return j, fmt.Errorf("agent: this token enrols any name, and the host name cannot be read (%v); give --name", err)
		}
		j.Node = strings.ToLower(strings.SplitN(host, ".", 2)[0])
	}
	if err := events.ValidateName("node", j.Node); err != nil {
		return j, fmt.Errorf("agent: %w", err)
	}
	bus, err := nodeSeed(filepath.Join(state, declaration.NodeSeedFile))
	if err != nil {
		return j, err
	}
	seed, _ := bus.Seed()
	j.Seed, j.own = string(seed), true
	req, err := enrolRequest(j, state, bus)
	if err != nil {
		return j, err
	}
	pub, _ := bus.PublicKey()
	opts := []nats.Option{nats.Nkey(pub, bus.Sign), nats.UserInfo(j.Node, j.Token), nats.CustomInboxPrefix(events.NodeInbox(j.Node))}
	reply, err := askEnrol(ctx, j, req, func() (*nats.Conn, error) {
		nc, err := dial(opts...)
		if errors.Is(err, nats.ErrNkeysNotSupported) {
			// An open bus asks nobody who they are: the token, in the
			// request, is what the controller checks.
			return dial()
		}
		return nc, err
	}, log)
	if err != nil {
		return j, err
	}
	done = enrolled{Mesh: j.Mesh, Node: j.Node, Seq: reply.Seq, Beat: reply.Beat}
	if err := writeSynced(filepath.Join(state, enrolledFile), done); err != nil {
		return j, fmt.Errorf("agent: enrolled %s, but cannot keep that it did (%v); start it again", j.Node, err)
	}
	log.Info("enrolled with keys this machine made", "node", j.Node, "seq", reply.Seq, "bus_key", pub)
	j.beat = decodeBeat(reply.Beat)
	return j, nil
}

// enrolRequest is the public half of every key, signed by the two that sign.
func enrolRequest(j Join, state string, bus nkeys.KeyPair) (declaration.EnrolRequest, error) {
	report, err := reportKey(filepath.Join(state, reportKeyFile))
	if err != nil {
		return declaration.EnrolRequest{}, err
	}
	curve, err := declaration.SealCurve(bus)
	if err != nil {
		return declaration.EnrolRequest{}, err
	}
	_, overlay, err := declaration.OverlayKey(bus)
	if err != nil {
		return declaration.EnrolRequest{}, err
	}
	busPub, _ := bus.PublicKey()
	reportPub, _ := report.PublicKey()
	req := declaration.EnrolRequest{Mesh: j.Mesh, Token: j.Token, Node: j.Node, Bus: busPub, Report: reportPub,
		Seal: declaration.CurvePublic(curve), Overlay: overlay}
	return req, req.Sign(bus, report)
}

// askEnrol asks until answered, a bounded number of times: a refusal is
// said at once, an unanswered ask (the controller starting) is asked again.
func askEnrol(ctx context.Context, j Join, req declaration.EnrolRequest, connect func() (*nats.Conn, error), log *slog.Logger) (declaration.EnrolReply, error) {
	body, _ := json.Marshal(req)
	var last error
	for attempt := range enrolAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return declaration.EnrolReply{}, ctx.Err()
			case <-time.After(min(time.Duration(attempt)*time.Second, 5*time.Second)):
			}
		}
		reply, err := askEnrolOnce(ctx, j, body, connect)
		var refused refusal
		if errors.As(err, &refused) {
			return reply, err
		}
		if err == nil {
			return reply, nil
		}
		last = err
		log.Info("enrolment not answered yet; asking again", "node", j.Node, "err", err)
	}
	return declaration.EnrolReply{}, fmt.Errorf("agent: the controller did not answer %s's enrolment %d times (%v); is mesh up running, and the bus in the join string right?", j.Node, enrolAttempts, last)
}

// refusal is the controller's (or the bus's) no: asking again changes nothing.
type refusal struct{ error }

func askEnrolOnce(ctx context.Context, j Join, body []byte, connect func() (*nats.Conn, error)) (declaration.EnrolReply, error) {
	nc, err := connect()
	if errors.Is(err, nats.ErrAuthorization) {
		return declaration.EnrolReply{}, refusal{fmt.Errorf("agent: the bus at %s refused the token for %s: it is spent, expired, revoked or another mesh's; ask the operator for a new one (mesh token create, or mesh node join %s)", j.Bus, j.Node, j.Node)}
	}
	if err != nil {
		return declaration.EnrolReply{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, events.EnrolSubject(j.Node), body)
	if err != nil {
		return declaration.EnrolReply{}, err
	}
	var reply declaration.EnrolReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return reply, fmt.Errorf("the enrolment's answer is not JSON: %w", err)
	}
	if reply.Error != "" {
		return reply, refusal{fmt.Errorf("agent: the controller refused to enrol %s: %s", j.Node, reply.Error)}
	}
	return reply, nil
}

// nodeSeed reads the node's seed, making it on the first start.
func nodeSeed(path string) (nkeys.KeyPair, error) {
	return ownKey(path, "node key", "the machine must be re-keyed: mesh node rekey NAME, then start the agent with that join string and a fresh state directory")
}

func decodeBeat(s string) string {
	b, _ := base64.StdEncoding.DecodeString(s)
	return string(b)
}
