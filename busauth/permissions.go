package busauth

import (
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/nats-io/jwt/v2"
)

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
		// That it is alive (issue 28): its own liveness subject only, so
		// one node cannot keep another looking alive.
		events.LivenessSubject(node),
		// Its newest declaration of the controller's, asked of the
		// controller when the last message on its subject is not one
		// (issue 29): its own only, answered only to its own inbox.
		events.NewestSubject(node),
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

// EnrolPermissions is all a connection holding a token for node may do:
// ask to be enrolled as node, and hear the answer (issue 29).
func EnrolPermissions(node string) jwt.Permissions {
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: jwt.StringList{events.EnrolSubject(node)}},
		Sub: jwt.Permission{Allow: jwt.StringList{events.NodeInbox(node) + ".>"}},
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
	// Nor say a node is alive: only the node's own agent may.
	deny := jwt.StringList{events.SubjectsEvents, events.SubjectsReports, events.SubjectsSecrets, events.LivenessPrefix + ".>"}
	for _, stream := range []string{events.Stream, events.SecretsStream} {
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

// ModulePermissions is all a running module's identity may do on the bus
// (issue 15), from its manifest: publish and answer on the services it
// provides, ask and hear the services it consumes, read and write its own
// state bucket, and report its own standing as a provider on its node.
// Nothing else: no other service, no stream, no other module's state, no
// consumer of the event stream, no other inbox.
//
// The holder of seats may also take work from each seat's queue (seats: the
// seats this instance holds now; a handover stops its program, which ends
// its connection, so a former holder does not keep the grant).
func ModulePermissions(node, module string, m manifest.Manifest, seats ...string) jwt.Permissions {
	bucket := events.StateBucket(module)
	kv := "KV_" + bucket
	pub := jwt.StringList{
		// Its standing, for itself on its node (the fold checks the
		// provider named is this module, signed by this identity).
		events.ReportSubject(node, events.ProviderFailing{}.EventType()),
		events.ReportSubject(node, events.ProviderRecovered{}.EventType()),
		// Its state: puts and deletes, and the API calls a key-value
		// bucket is read and watched with.
		"$KV." + bucket + ".>",
		"$JS.API.STREAM.INFO." + kv,
		"$JS.API.STREAM.MSG.GET." + kv,
		"$JS.API.DIRECT.GET." + kv,
		"$JS.API.DIRECT.GET." + kv + ".>",
		"$JS.API.CONSUMER.CREATE." + kv,
		"$JS.API.CONSUMER.CREATE." + kv + ".>",
		"$JS.API.CONSUMER.DELETE." + kv + ".>",
		"$JS.FC." + kv + ".>",
		"$JS.API.INFO",
	}
	pub = append(pub, seatGrants(seats)...)
	sub := jwt.StringList{events.ModuleInbox(node, module) + ".>"}
	for _, req := range m.Provides {
		pub = append(pub, events.ServiceSubjects(req))
		sub = append(sub, events.ServiceSubjects(req))
	}
	for _, req := range m.Consumes {
		pub = append(pub, events.ServiceSubjects(req))
		sub = append(sub, events.ServiceSubjects(req))
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		Sub: jwt.Permission{Allow: sub},
		// Answering a request is publishing once to its reply subject.
		Resp: &jwt.ResponsePermission{MaxMsgs: 1},
	}
}

// seatGrants are what the holder of seats may do besides its manifest's
// grants: take work from each seat's queue (make and read its consumers,
// fetch, acknowledge), nothing else of those streams.
func seatGrants(seats []string) []string {
	var pub []string
	for _, s := range seats {
		stream := events.SeatStream(s)
		pub = append(pub,
			"$JS.API.STREAM.INFO."+stream,
			"$JS.API.CONSUMER.CREATE."+stream,
			"$JS.API.CONSUMER.CREATE."+stream+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+stream+".>",
			"$JS.API.CONSUMER.INFO."+stream+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+stream+".>",
			"$JS.ACK."+stream+".>",
		)
	}
	return pub
}
