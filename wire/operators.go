package wire

import (
	"strings"
	"time"

	"github.com/meshctl/mesh/events"
)

// Operators (issue 33): who may call which verb, and how the controller
// knows who called.
//
// A verb is called on its subject under CallerPrefix with the caller's
// public key as a token: mesh.op.<KEY>.<verb> (mesh.op.<KEY>.node.assign).
// On a closed bus an operator's connection may publish only under its own
// key (busauth.OperatorPermissions), so the subject a request arrives on is
// the bus's word for who sent it: the controller reads the caller there,
// never from a field of the request. On an open bus nothing is proven, and
// a client that holds no key calls as OpenCaller.

// CallerPrefix is where verbs are called, the caller's key the next token.
const CallerPrefix = "mesh.op"

// OpenCaller is the caller token of a client with no operator key, which
// an open bus lets in and a closed bus refuses.
const OpenCaller = "open"

// CallerSubject is where caller calls the verb on subject (one of the
// Subject constants).
func CallerSubject(caller, subject string) string {
	return CallerPrefix + "." + caller + "." + strings.TrimPrefix(subject, APIPrefix+".")
}

// EndpointSubject is where the controller hears every caller of the verb
// on subject.
func EndpointSubject(subject string) string { return CallerSubject("*", subject) }

// OperatorInbox is the inbox prefix of the operator with key: the only
// answers its connection may hear (busauth.OperatorPermissions), so one
// operator never reads another's (a token's secret, a join string).
func OperatorInbox(key string) string { return "_INBOX_" + key }

// CallerOf reads the caller token out of a subject CallerSubject made.
func CallerOf(subject string) string {
	rest, ok := strings.CutPrefix(subject, CallerPrefix+".")
	if !ok {
		return ""
	}
	caller, _, _ := strings.Cut(rest, ".")
	return caller
}

// Verb subjects of the operators themselves.
const (
	SubjectOperatorAdd    = APIPrefix + ".operator.add"
	SubjectOperatorList   = APIPrefix + ".operator.list"
	SubjectOperatorShow   = APIPrefix + ".operator.show"
	SubjectOperatorRemove = APIPrefix + ".operator.remove"
)

// needs is the role each verb needs. Enforced twice: the bus lets an
// operator publish only the verbs its role allows (busauth), and the
// controller refuses any other (commands.Serve), so a hole in one is not a
// hole in the mesh. A verb missing here needs admin: a new verb is the
// admin's until a line gives it to a weaker role.
var needs = map[string]events.Role{
	// Reads. No verb answers a secret's value to anyone (rule 21): the
	// log holds secrets sealed, and only nodes open them.
	SubjectNodeList: events.RoleViewer, SubjectNodeShow: events.RoleViewer, SubjectNodePlan: events.RoleViewer,
	SubjectNodeSelect: events.RoleViewer, SubjectStatus: events.RoleViewer, SubjectHistory: events.RoleViewer,
	SubjectAudit: events.RoleViewer, SubjectModuleList: events.RoleViewer, SubjectModuleShow: events.RoleViewer,
	SubjectProjectionsStatus: events.RoleViewer, SubjectProjectionsVerify: events.RoleViewer,
	SubjectForeignList: events.RoleViewer, SubjectReportJudge: events.RoleViewer, SubjectPushPlan: events.RoleViewer,
	SubjectRolloutPlan: events.RoleViewer, SubjectRolloutList: events.RoleViewer, SubjectRolloutShow: events.RoleViewer,
	SubjectNetworkShow: events.RoleViewer, SubjectSeatList: events.RoleViewer, SubjectSeatShow: events.RoleViewer,
	SubjectOperatorList: events.RoleViewer, SubjectOperatorShow: events.RoleViewer,
	SubjectArtifactList: events.RoleViewer, SubjectArtifactShow: events.RoleViewer,
	// Where one's own request stands (inflight.go): every operator asks
	// it, for whatever verb it called, when its connection came back.
	SubjectRequestState: events.RoleViewer,
	// What nodes run: the catalogue, assignments, sends, rollouts, a
	// node's declared capabilities and labels, its seats' handovers.
	SubjectModuleRegister: events.RoleDeployer, SubjectNodeAssign: events.RoleDeployer,
	SubjectNodeUnassign: events.RoleDeployer, SubjectNodeAssignBatch: events.RoleDeployer, SubjectPush: events.RoleDeployer,
	SubjectDeclare: events.RoleDeployer, SubjectRolloutStart: events.RoleDeployer, SubjectRolloutControl: events.RoleDeployer,
	SubjectNodeChange: events.RoleDeployer, SubjectSeatHandover: events.RoleDeployer,
	// Everything else is the admin's: operators, enrolment, tokens and
	// keys, retirement, secrets (rotate, forget), putting and removing
	// artifacts (their bytes go to the object store on the bus, which only
	// the admin's grant writes), the network, the read
	// models' rebuild, foreign messages' acknowledgement, a standing
	// set by hand (report).
}

// Needs is the role the verb on subject needs.
func Needs(subject string) events.Role {
	if r, ok := needs[subject]; ok {
		return r
	}
	return events.RoleAdmin
}

// Verbs are the subjects of every verb, for the bus's grants and tests.
var Verbs = []string{
	SubjectNodeEnroll, SubjectNodeRetire, SubjectNodeChange, SubjectNodeList, SubjectNodeShow, SubjectNodeAssign,
	SubjectNodeUnassign, SubjectNodePlan, SubjectNodeJoin, SubjectPush, SubjectDeclare, SubjectStatus, SubjectHistory,
	SubjectAudit, SubjectReport, SubjectModuleRegister, SubjectModuleList, SubjectModuleShow, SubjectProjectionsStatus,
	SubjectProjectionsRebuild, SubjectProjectionsVerify, SubjectForeignList, SubjectForeignAck, SubjectReportJudge,
	SubjectNodeEnrollBatch, SubjectNodeAssignBatch, SubjectNodeSelect, SubjectRotate, SubjectPushPlan, SubjectRolloutPlan,
	SubjectRolloutStart, SubjectRolloutControl, SubjectRolloutList, SubjectRolloutShow, SubjectSecretForget,
	SubjectNetworkSet, SubjectNetworkShow, SubjectNetworkAddress, SubjectSeatList, SubjectSeatShow, SubjectSeatHandover,
	SubjectTokenCreate, SubjectTokenList, SubjectTokenRevoke, SubjectNodeRekey,
	SubjectOperatorAdd, SubjectOperatorList, SubjectOperatorShow, SubjectOperatorRemove,
	SubjectArtifactPut, SubjectArtifactList, SubjectArtifactShow, SubjectArtifactRemove,
	SubjectRequestState,
}

// Operator is an operator as the log knows it: never its seed.
type Operator struct {
	events.OperatorAdded
	AddedAt   time.Time  `json:"added_at"`
	AddedBy   string     `json:"added_by,omitempty"`
	Removed   bool       `json:"removed"`
	RemovedAt *time.Time `json:"removed_at,omitempty"`
	RemovedBy string     `json:"removed_by,omitempty"`
	Version   uint64     `json:"version"`
}

// OperatorAddRequest adds Name with Role, connecting with the public nkey
// Key: the seed stays where the command that made it wrote it.
type OperatorAddRequest struct {
	CommandID string      `json:"command_id"`
	Name      string      `json:"name"`
	Role      events.Role `json:"role"`
	Key       string      `json:"key"`
}

// OperatorChanged answers an add or a remove: what it appended (Seq 0 and
// Changed false when there was nothing to do), the operator as the read
// models now hold it, and how many live connections a removal ended.
type OperatorChanged struct {
	Changed  bool     `json:"changed"`
	Seq      uint64   `json:"seq"`
	Operator Operator `json:"operator"`
	Cut      int      `json:"cut"`
}

// OperatorList answers every operator, removed ones included, by name;
// Caller is the operator who asked ("" on an open bus).
type OperatorList struct {
	Operators []Operator `json:"operators"`
	Caller    string     `json:"caller,omitempty"`
}
