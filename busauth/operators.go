package busauth

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Operators on a closed bus (issue 33). Each connects with its own key,
// which the log records (events.OperatorAdded); the callout finds it in
// the read models and grants what its role may do, by subject: its own
// verbs, called under its own key (wire.CallerSubject), so the controller
// knows who asked from the subject alone; the stream's reads; and its own
// inbox, so no operator hears another's answers (a token's secret, a
// join string).

// operatorUser prefixes the name the callout gives an operator's
// connection: a node's name holds no ':', so the two never meet, and a
// removal cuts exactly "operator:NAME" (OperatorUser).
const operatorUser = "operator:"

// OperatorUser is the name an operator's connections have on the bus.
func OperatorUser(name string) string { return operatorUser + name }

// OperatorOf is the operator a connection's user name is, if it is one.
func OperatorOf(user string) (string, bool) { return strings.CutPrefix(user, operatorUser) }

// OperatorPermissions is what an operator of role, connecting with key,
// may do on the bus. Every role: call the verbs its role allows under its
// own key, ask which controllers serve, read the stream MESH (its
// information, a message, a consumer of it: mesh events, push --wait), and
// hear answers on its own inbox only (an admin, anything). A deployer may also ask nodes for
// their programs' logs. An admin may call every verb and use JetStream's
// API beyond the stream MESH (backup reads the secrets' salts, which open
// nothing without the controller key), but, like every operator, never
// write, reshape or remove the stream or the salts (rule 19: only the
// controller appends; forgetting is a verb, recorded), never say a node
// is alive, never answer for a node's programs. No role can read a
// secret's value: the log holds it sealed, to a node's key.
func OperatorPermissions(role events.Role, key string) jwt.Permissions {
	stream := events.Stream
	pub := jwt.StringList{
		"$SRV.PING." + wire.ServiceName, // which controllers serve: a client notices one gone
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
	// Its own inbox, and the log as it is appended (what a consumer of
	// it reads anyway: secrets in it are sealed to nodes).
	sub := jwt.StringList{wire.OperatorInbox(key) + ".>", events.SubjectsEvents, events.SubjectsReports}
	if role.Allows(events.RoleAdmin) {
		// Every verb, those added later included, the services protocol
		// (nats micro ls, info, stats), and anything to hear: the admin
		// may do all a weaker role may, and the nats CLI's inbox with it.
		// And what an operator did before roles: ask a module's service
		// as a consumer would (nats req mesh.svc.R.N), put work on a
		// seat's queue, read and write a module's state bucket. And put
		// an artifact's bytes into the object store (mesh artifact put
		// uploads them itself: the controller never carries them).
		pub = append(pub, wire.CallerPrefix+"."+key+".>", "$JS.API.>", "$JS.FC.>", "$JS.ACK.>", "$SRV.>",
			events.ServicePrefix+".>", "mesh.seat.>", "$KV.>", "$O.>")
	} else {
		for _, verb := range wire.Verbs {
			if role.Allows(wire.Needs(verb)) {
				pub = append(pub, wire.CallerSubject(key, verb))
			}
		}
	}
	if role.Allows(events.RoleDeployer) {
		// Asking a node for its programs' logs, and hearing the answer,
		// which its agent sends under its own name (rule 18).
		pub = append(pub, events.LogsSubject("*"))
		sub = append(sub, events.LogsReplyPrefix("*")+".>")
	}
	api := "$JS.API.STREAM."
	deny := jwt.StringList{events.SubjectsEvents, events.SubjectsReports, events.SubjectsSecrets, events.LivenessPrefix + ".>",
		events.LogsReplyPrefix("*") + ".>", events.StoredPrefix + ".>"}
	for _, s := range []string{events.Stream, events.SecretsStream} {
		for _, verb := range []string{"CREATE", "UPDATE", "DELETE", "PURGE", "RESTORE", "MSG.DELETE"} {
			deny = append(deny, api+verb+"."+s)
		}
	}
	p := jwt.Permissions{Pub: jwt.Permission{Allow: pub, Deny: deny}, Sub: jwt.Permission{Allow: sub}}
	if role.Allows(events.RoleAdmin) {
		p.Sub.Allow = nil // no list: every subject
		// Answering a request it heard (standing in for a provider with
		// the nats CLI: nats reply), once, on whatever inbox asked.
		p.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
	}
	return p
}

// ReadOperatorKey reads an operator's key file: an nkeys user seed, mode
// 0600, as the controller's key is read.
func ReadOperatorKey(path string) (nkeys.KeyPair, error) {
	kp, err := readKey(path, "operator key")
	if err != nil {
		return nil, err
	}
	if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicUserKey(pub) {
		return nil, fmt.Errorf("the key %s is not a user's key; an operator's key is made by mesh operator add", path)
	}
	return kp, nil
}

// KeyOptions connect as the operator whose key is kp: its nkey, and its
// own inbox, the only one its grant lets it hear.
func KeyOptions(kp nkeys.KeyPair) []nats.Option {
	pub, _ := kp.PublicKey()
	return []nats.Option{nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(wire.OperatorInbox(pub))}
}

// WriteNewOperatorKey makes an operator's key and writes its seed to path,
// mode 0600, refusing to replace a file there: a key overwritten is a
// credential lost. It answers the public key.
func WriteNewOperatorKey(path string) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", err
	}
	err = declaration.WriteNewKey(path, kp)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s exists; give another --out, or remove it first", path)
	}
	if err != nil {
		return "", fmt.Errorf("cannot write the operator key %s: %w", path, err)
	}
	pub, _ := kp.PublicKey()
	return pub, nil
}
