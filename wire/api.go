package wire

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
)

// The wire: one subject per verb under APIPrefix, JSON both ways. These types
// are the stable schema of the controller's answers and of `--json` output.
const (
	ServiceName    = "mesh-controller"
	ServiceVersion = "0.1.0"
	APIPrefix      = "mesh.api"

	SubjectNodeEnroll         = APIPrefix + ".node.enroll"
	SubjectNodeRetire         = APIPrefix + ".node.retire"
	SubjectNodeChange         = APIPrefix + ".node.change"
	SubjectNodeList           = APIPrefix + ".node.list"
	SubjectNodeShow           = APIPrefix + ".node.show"
	SubjectNodeAssign         = APIPrefix + ".node.assign"
	SubjectNodeUnassign       = APIPrefix + ".node.unassign"
	SubjectNodePlan           = APIPrefix + ".node.plan"
	SubjectNodeJoin           = APIPrefix + ".node.join"
	SubjectPush               = APIPrefix + ".push"
	SubjectDeclare            = APIPrefix + ".declare"
	SubjectStatus             = APIPrefix + ".status"
	SubjectHistory            = APIPrefix + ".history"
	SubjectAudit              = APIPrefix + ".audit"
	SubjectReport             = APIPrefix + ".report"
	SubjectModuleRegister     = APIPrefix + ".module.register"
	SubjectModuleList         = APIPrefix + ".module.list"
	SubjectModuleShow         = APIPrefix + ".module.show"
	SubjectProjectionsStatus  = APIPrefix + ".projections.status"
	SubjectProjectionsRebuild = APIPrefix + ".projections.rebuild"
	SubjectProjectionsVerify  = APIPrefix + ".projections.verify"
	SubjectForeignList        = APIPrefix + ".foreign.list"
	SubjectForeignAck         = APIPrefix + ".foreign.ack"
	SubjectReportJudge        = APIPrefix + ".report.judge"
	SubjectNodeEnrollBatch    = APIPrefix + ".node.enroll-batch"
	SubjectNodeAssignBatch    = APIPrefix + ".node.assign-batch"
	SubjectNodeSelect         = APIPrefix + ".node.select"
	SubjectRotate             = APIPrefix + ".rotate"
	SubjectPushPlan           = APIPrefix + ".push.plan"
	SubjectRolloutPlan        = APIPrefix + ".rollout.plan"
	SubjectRolloutStart       = APIPrefix + ".rollout.start"
	SubjectRolloutControl     = APIPrefix + ".rollout.control"
	SubjectRolloutList        = APIPrefix + ".rollout.list"
	SubjectRolloutShow        = APIPrefix + ".rollout.show"
	SubjectSecretForget       = APIPrefix + ".secret.forget"
	SubjectNetworkSet         = APIPrefix + ".network.set"
	SubjectNetworkShow        = APIPrefix + ".network.show"
	SubjectNetworkAddress     = APIPrefix + ".network.address"
	SubjectSeatList           = APIPrefix + ".seat.list"
	SubjectSeatShow           = APIPrefix + ".seat.show"
	SubjectSeatHandover       = APIPrefix + ".seat.handover"
	SubjectTokenCreate        = APIPrefix + ".token.create"
	SubjectTokenList          = APIPrefix + ".token.list"
	SubjectTokenRevoke        = APIPrefix + ".token.revoke"
	SubjectNodeRekey          = APIPrefix + ".node.rekey"
)

// writes are the verbs that change the mesh: one whose answer does not
// come may have acted (ErrUnknownOutcome), where a read that times out has
// done nothing.
var writes = map[string]bool{
	SubjectNodeEnroll: true, SubjectNodeRetire: true, SubjectNodeAssign: true, SubjectNodeUnassign: true,
	SubjectPush: true, SubjectDeclare: true, SubjectReport: true, SubjectModuleRegister: true,
	SubjectForeignAck: true, SubjectProjectionsRebuild: true, SubjectNodeEnrollBatch: true, SubjectNodeAssignBatch: true,
	SubjectRotate: true, SubjectSecretForget: true, SubjectNodeChange: true, SubjectRolloutStart: true, SubjectRolloutControl: true,
	SubjectNetworkSet: true, SubjectNetworkAddress: true, SubjectSeatHandover: true,
	// A join makes a token now (issue 29), as a re-key does.
	SubjectNodeJoin: true, SubjectTokenCreate: true, SubjectTokenRevoke: true, SubjectNodeRekey: true,
	SubjectArtifactPut: true, SubjectArtifactRemove: true, SubjectOperatorAdd: true, SubjectOperatorRemove: true,
}

// Writes reports whether the verb on subject changes the mesh.
func Writes(subject string) bool { return writes[subject] }

// EnrollRequest asks for a node to join the mesh. CommandID makes a retry of
// the same request idempotent; the client makes one per invocation.
type EnrollRequest struct {
	CommandID    string            `json:"command_id"`
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
	// Address, when set, is the overlay address the node is to have,
	// rather than the pool's next free one.
	Address string `json:"address,omitempty"`
}

// ChangeNodeRequest replaces a node's declared capabilities (when not
// nil: an empty list clears them) and labels (likewise).
type ChangeNodeRequest struct {
	CommandID    string            `json:"command_id"`
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
}

// RetireRequest asks for a node to leave the mesh.
type RetireRequest struct {
	CommandID string `json:"command_id"`
	Name      string `json:"name"`
}

// NameRequest names one node (or module). AsOf, where a verb takes it,
// answers as the mesh was at that moment.
type NameRequest struct {
	Name string    `json:"name"`
	AsOf time.Time `json:"as_of,omitzero"`
}

// StatusRequest asks for status now, or as of a moment in the past.
type StatusRequest struct {
	AsOf time.Time `json:"as_of,omitzero"`
	// Brief leaves out each node's digests, which status's table does not
	// show: two thirds of the answer's bytes at ten thousand nodes.
	Brief bool `json:"brief,omitempty"`
	// Selector, when set, answers only the active nodes it chooses (the
	// standings, programs and causes stay the whole mesh's).
	Selector string `json:"selector,omitempty"`
	// DetailsOnce asks a brief answer's table for each distinct detail
	// once (StatusTable.DetailsOnce): a command line or page that reads
	// that form says so, and one from before it, which does not, is
	// answered a detail a row as it reads them.
	DetailsOnce bool `json:"details_once,omitempty"`
}

// Empty is a request with nothing in it.
type Empty struct{}

// Changed answers a command: what it appended (Seq 0 and Changed false when
// there was nothing to do) and the node as the read models now hold it.
type Changed struct {
	Changed bool     `json:"changed"`
	Seq     uint64   `json:"seq"`
	Node    NodeView `json:"node"`
	// Identity lets the client print the node's join string.
	Identity Identity `json:"identity"`
}

// NodeView is a node as `node list --json` and `node show --json` print it.
type NodeView struct {
	Name         string            `json:"name"`
	Capabilities []string          `json:"capabilities"`
	Labels       map[string]string `json:"labels"`
	Retired      bool              `json:"retired"`
	EnrolledAt   time.Time         `json:"enrolled_at"`
	RetiredAt    *time.Time        `json:"retired_at,omitempty"`
	EnrolledSeq  uint64            `json:"enrolled_seq"`
	Version      uint64            `json:"version"`
	// Address is its overlay address ("" before the network is set).
	Address     string           `json:"address,omitempty"`
	Assignments []AssignmentView `json:"assignments"`
	LastSent    *Sent            `json:"last_sent"`
	LastReport  *ReportView      `json:"last_report"`
	// Filled by node show: the node's state, what it would be sent now
	// (content digest) beside what it was sent, what composition left out
	// or could not resolve, and the standings it is part of.
	State      State                `json:"state,omitempty"`
	Since      *time.Time           `json:"since,omitempty"`
	Detail     string               `json:"detail,omitempty"`
	WouldSend  string               `json:"would_send,omitempty"`
	LeftOut    []compose.LeftOut    `json:"left_out,omitempty"`
	Unresolved []compose.Unresolved `json:"unresolved,omitempty"`
	// Chosen: the provider each of its consumers would receive, and why.
	Chosen    []compose.Chosen `json:"chosen,omitempty"`
	Standings []StandingView   `json:"standings,omitempty"`
	Runtimes  []Runtime        `json:"runtimes,omitempty"`
	// Facts and Detected are what its agent detected of its machine: the
	// facts templates read, and the capabilities they give it beside the
	// declared ones.
	Facts    map[string]string `json:"facts,omitempty"`
	Detected []string          `json:"detected,omitempty"`
	AsOf     *time.Time        `json:"as_of,omitempty"`
	// LastHeard is when this controller last heard its agent say it is
	// alive (nil: not since it started); UnreachableSince is set while the
	// log records it unreachable (issue 28).
	LastHeard        *time.Time `json:"last_heard,omitempty"`
	UnreachableSince *time.Time `json:"unreachable_since,omitempty"`
	// Causes: why the read models this answer comes from cannot be
	// trusted, or what else keeps the mesh from being well (as in status).
	Causes []string `json:"causes,omitempty"`
}

// ReportView is the last report a node sent back.
type ReportView struct {
	Outcome  events.Outcome           `json:"outcome"`
	Sequence uint64                   `json:"sequence"`
	Digest   string                   `json:"digest"`
	Reason   string                   `json:"reason,omitempty"`
	Failed   []events.ResourceFailure `json:"failed,omitempty"`
	At       time.Time                `json:"at"`
}

// AssignmentView is one module on a node: the build it has and, when the
// catalogue has a newer one, which (mesh assign again takes it).
type AssignmentView struct {
	Module   string            `json:"module"`
	Build    string            `json:"build"`
	Latest   string            `json:"latest"`
	Settings map[string]string `json:"settings"`
	Policy   events.Policy     `json:"policy"`
}

// ListRequest asks for every node; Brief only for what node list's table
// shows (name, capabilities, labels, retired, enrolled): a tenth of the bytes.
type ListRequest struct {
	Brief bool `json:"brief,omitempty"`
}

// NodeList is every node, retired ones included.
type NodeList struct {
	Nodes []NodeView `json:"nodes"`
}

// RebuildReply says what a rebuild did.
type RebuildReply struct {
	From       string  `json:"from"`
	To         string  `json:"to"`
	Events     uint64  `json:"events"`
	Checkpoint uint64  `json:"checkpoint"`
	Seconds    float64 `json:"seconds"`
}

// RegisterRequest carries a manifest file's bytes; File names it in messages.
type RegisterRequest struct {
	CommandID string `json:"command_id"`
	File      string `json:"file"`
	Manifest  string `json:"manifest"`
}

// Registered answers a registration. Changed false: this content is already
// the latest build, and nothing was appended.
type Registered struct {
	Changed  bool   `json:"changed"`
	Seq      uint64 `json:"seq"`
	Module   string `json:"module"`
	Build    string `json:"build"`
	Previous string `json:"previous,omitempty"`
}

// ModuleView is a module as `module list --json` and `module show --json` print it.
type ModuleView struct {
	Name       string                 `json:"name"`
	Latest     string                 `json:"latest"`
	Builds     []BuildView            `json:"builds"`
	AssignedTo []AssignedView         `json:"assigned_to"`
	Requires   []string               `json:"requires"`
	Provides   []string               `json:"provides"`
	Consumes   []string               `json:"consumes"`
	Settings   map[string]SettingView `json:"settings"`
	Resources  []ResourceView         `json:"resources"`
	// Unreadable says why the latest build's manifest cannot be read
	// (empty when it can): the module is still listed.
	Unreadable string `json:"unreadable,omitempty"`
}

// BuildView is one registered build.
type BuildView struct {
	Build        string    `json:"build"`
	RegisteredAt time.Time `json:"registered_at"`
	Seq          uint64    `json:"seq"`
}

// AssignedView is one node a module is assigned to, and with which build.
type AssignedView struct {
	Node   string `json:"node"`
	Build  string `json:"build"`
	Latest bool   `json:"latest"`
}

// SettingView is one setting of the latest build.
type SettingView struct {
	Default  *string `json:"default,omitempty"`
	Required bool    `json:"required"`
}

// ResourceView is one resource of the latest build, without its content.
type ResourceView struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// ModuleList is the catalogue.
type ModuleList struct {
	Modules []ModuleView `json:"modules"`
}

// AssignRequest gives a node a module's latest build.
type AssignRequest struct {
	CommandID string            `json:"command_id"`
	Node      string            `json:"node"`
	Module    string            `json:"module"`
	Settings  map[string]string `json:"settings"`
	// Unset names settings to remove; Reset starts from the manifest's
	// defaults. Settings neither given, unset nor reset stay as they are.
	Unset []string `json:"unset,omitempty"`
	Reset bool     `json:"reset,omitempty"`
	// Build, when set, is the build to assign (full or short); the latest
	// otherwise. Policy, when set, replaces the assignment's policy
	// (pinned, manual or auto); it is kept otherwise (manual when new).
	Build  string `json:"build,omitempty"`
	Policy string `json:"policy,omitempty"`
}

// EnrollBatchRequest enrolls up to MaxBatch nodes, all or nothing. The
// nodes' own command ids are not used: the batch's is.
type EnrollBatchRequest struct {
	CommandID string          `json:"command_id"`
	Nodes     []EnrollRequest `json:"nodes"`
}

// AssignBatchRequest gives up to MaxBatch nodes a module, all or nothing.
type AssignBatchRequest struct {
	CommandID string            `json:"command_id"`
	Module    string            `json:"module"`
	Settings  map[string]string `json:"settings"`
	Nodes     []string          `json:"nodes"`
	// Unset, Reset, Build and Policy: as AssignRequest's.
	Unset  []string `json:"unset,omitempty"`
	Reset  bool     `json:"reset,omitempty"`
	Build  string   `json:"build,omitempty"`
	Policy string   `json:"policy,omitempty"`
}

// BatchReply answers a bulk verb: the nodes it changed, at which last
// sequence, and those that needed nothing.
type BatchReply struct {
	Seq       uint64   `json:"seq"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
	// Build is the build assigned, for an assignment batch.
	Build string `json:"build,omitempty"`
}

// SelectRequest asks which active nodes a selector chooses.
type SelectRequest struct {
	Selector string `json:"selector"`
}

// Selected answers SelectRequest: node names in name order.
type Selected struct {
	Nodes []string `json:"nodes"`
}

// UnassignRequest takes a module off a node.
type UnassignRequest struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node"`
	Module    string `json:"module"`
}

// Assigned answers assign and unassign. Changed false: nothing to do.
type Assigned struct {
	Changed  bool   `json:"changed"`
	Seq      uint64 `json:"seq"`
	Node     string `json:"node"`
	Module   string `json:"module"`
	Build    string `json:"build,omitempty"`
	Previous string `json:"previous,omitempty"`
	// Settings are those the assignment holds now, a secret one as set
	// and its version (rule 21).
	Settings map[string]string `json:"settings,omitempty"`
	// Policy is the assignment's upgrade policy now (unassign: none);
	// PreviousPolicy what it was, when this assignment changed it.
	Policy         events.Policy `json:"policy,omitempty"`
	PreviousPolicy events.Policy `json:"previous_policy,omitempty"`
	// Changes are the settings this assignment changed, in name order.
	Changes []SettingChange `json:"changes,omitempty"`
}

// SettingChange is one setting an assignment changed, as people may see
// it: Secret, as set and its version, never its value. Old null: it was
// not set (the manifest's default applied); New null: it is no longer set.
type SettingChange struct {
	Setting string  `json:"setting"`
	Old     *string `json:"old"`
	New     *string `json:"new"`
	Secret  bool    `json:"secret,omitempty"`
}

// Plan is what a node would be sent now, and how that differs from what it
// was last sent. The stable fields of `mesh plan --json`: node, digest,
// resources, left_out, unresolved, changes.
type Plan struct {
	Node       string                `json:"node"`
	Composable bool                  `json:"composable"`
	Reason     string                `json:"reason,omitempty"`
	Digest     string                `json:"digest"`
	Modules    []compose.ModuleBuild `json:"modules"`
	Resources  []compose.Resource    `json:"resources"`
	Receives   []compose.Receipt     `json:"receives"`
	// Chosen is each of receives with why that provider (issue 31).
	Chosen     []compose.Chosen     `json:"chosen"`
	LeftOut    []compose.LeftOut    `json:"left_out"`
	Unresolved []compose.Unresolved `json:"unresolved"`
	Problems   []string             `json:"problems"`
	// Sent is what the node was last sent; nil when it was never sent anything.
	Sent    *Sent            `json:"sent"`
	Changes []compose.Change `json:"changes"`
}

// PushRequest sends declarations: to one node, to every active node, or
// (Behind) to the nodes that are not doing what they were told.
type PushRequest struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node,omitempty"`
	Behind    bool   `json:"behind,omitempty"`
	// Selector bounds the push to the active nodes it chooses (the
	// selector of mesh assign --selector); with Behind, those behind.
	Selector string `json:"selector,omitempty"`
	// Nodes bounds the push to these nodes (a rollout's wave).
	Nodes []string `json:"nodes,omitempty"`
	// Progress, when set, is a subject the controller says on how many
	// nodes it has sent to so far, a window at a time.
	Progress string `json:"progress,omitempty"`
	// By is what the declarations are recorded as sent by: "push" when
	// empty, "rollout ID" from a rollout's drive. Never from the bus
	// (json "-": neither sent nor read), so no client can make a push
	// pass for a rollout's step; exported only so that the controller,
	// in another package, can set it.
	By string `json:"-"`
	// Once: a node whose aggregate moved between composing and appending
	// is left out, not composed and sent again (a rollout's drive decides
	// on it at its next step). Never from the bus, as By.
	Once bool `json:"-"`
}

// PushReply says what a push did, node by node.
type PushReply struct {
	Sent   []PushedNode `json:"sent"`
	Unsent []UnsentNode `json:"unsent"`
	// Considered is how many nodes the push looked at.
	Considered int `json:"considered"`
	// Held are the nodes left out because a hand declaration holds them
	// (mesh declare): only a push naming one sends to it.
	Held []UnsentNode `json:"held,omitempty"`
}

// PushedNode is one declaration sent.
type PushedNode struct {
	Node      string `json:"node"`
	Sequence  uint64 `json:"sequence"`
	Digest    string `json:"digest"`
	Resources int    `json:"resources"`
	StreamSeq uint64 `json:"seq"`
	Note      string `json:"note,omitempty"`
}

// UnsentNode is a node the push could not send to, and why.
type UnsentNode struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// DeclareRequest sends a hand-written declaration body to a node.
type DeclareRequest struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node"`
	File      string `json:"file"`
	Body      string `json:"body"`
}

// Identity is what an agent needs to join: the mesh's name, the node's
// (none for a token any machine may enrol with), the key it pins, and the
// enrolment token ("ID.SECRET": a secret, said once). The client adds where
// the bus is. Seed is only for nodes enrolled before nodes made their own
// keys (LegacyIdentity): no verb answers one any more.
type Identity struct {
	Mesh  string `json:"mesh"`
	Node  string `json:"node,omitempty"`
	Key   string `json:"key"`
	Token string `json:"token,omitempty"`
	Seed  string `json:"seed,omitempty"`
}

// StandingView is a provider failing a consumer.
type StandingView struct {
	Provider string    `json:"provider"`
	Machine  string    `json:"machine"`
	Consumer string    `json:"consumer"`
	Word     string    `json:"word"`
	Since    time.Time `json:"since"`
	Updated  time.Time `json:"updated"`
	Seq      uint64    `json:"seq"`
}

// ReportRequest is a provider's standing: failing (with its word) or recovered.
type ReportRequest struct {
	CommandID string `json:"command_id"`
	Failing   bool   `json:"failing"`
	Provider  string `json:"provider"`
	Machine   string `json:"machine"`
	Consumer  string `json:"consumer"`
	Word      string `json:"word,omitempty"`
}

// Reported answers a standing report. Changed false: a recovery with nothing failing.
type Reported struct {
	Changed bool   `json:"changed"`
	Seq     uint64 `json:"seq"`
}

// Verified answers projections verify: the differences, "" when none.
type Verified struct {
	Checkpoint uint64  `json:"checkpoint"`
	Diff       string  `json:"diff"`
	Seconds    float64 `json:"seconds"`
	// Snapshot is the newest snapshot of the read models on the bus, the
	// one a controller with none starts from, held to the same fold up to
	// the event it holds; absent when none is published.
	Snapshot *VerifiedSnapshot `json:"snapshot,omitempty"`
}

// VerifiedSnapshot is what verify found of the newest published snapshot:
// Refused says why a controller would not start from it (Stale: it is of
// another schema or stream, which is no fault), Diff how its read models
// differ from a fold of the stream up to Checkpoint; both empty when it is
// sound.
type VerifiedSnapshot struct {
	Name       string `json:"name"`
	Checkpoint uint64 `json:"checkpoint"`
	Bytes      uint64 `json:"bytes"`
	Digest     string `json:"digest"`
	Stale      bool   `json:"stale"`
	Refused    string `json:"refused"`
	Diff       string `json:"diff"`
}

// FoldRequest asks for a rebuild or a verify. Progress, when set, is a
// subject the controller publishes FoldProgress to as it folds.
type FoldRequest struct {
	Progress string `json:"progress,omitempty"`
}

// FoldProgress is how far a rebuild or verify has folded.
type FoldProgress struct {
	Folded uint64  `json:"folded"`
	Total  uint64  `json:"total"`
	Rate   float64 `json:"rate"` // events a second so far
}

// NewCommandID makes the id that turns a retry of this invocation into a no-op.
func NewCommandID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MaxBatch is the most nodes one bulk request changes: one less than
// JetStream's limit of messages in one atomic batch (which is what makes
// the request all or nothing), leaving room for the address pool's event.
// The command line sends a longer list as several requests.
const MaxBatch = 999
