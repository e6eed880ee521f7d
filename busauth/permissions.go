package busauth

import (
	"time"

	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/nats-io/jwt/v2"
)

// NodePermissions is all a node's identity may do on the bus. A denied
// publish is dropped without a word and a JetStream call then times out,
// so the agent is built to need exactly these (docs/security.md, "Who
// may say what").
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
		// The content keys of its own files, asked of the controller at
		// apply (issue 29 point 6): answered for its own name only.
		events.ContentKeySubject(node),
		// Answers to the operator's requests for its programs' logs
		// (issue 31 point 8), under its own name only: no other node can
		// put words in its programs' mouths. A reply permission instead
		// would let it answer whatever it hears once, the controller's
		// publish of its declaration (a JetStream request) included.
		events.LogsReplyPrefix(node) + ".*",
		// An artifact its declaration names (issue 32): asked of the
		// controller, which checks the declaration and makes the node's
		// one consumer, named for it, of that object's chunks alone. Its
		// information and its next messages are the node's to read; no
		// other consumer, no object by name, no listing, no stream
		// information, no direct get of the bucket's stream: the node
		// cannot choose what it reads, only read what it was handed.
		events.ArtifactSubject(node),
		"$JS.API.CONSUMER.INFO." + events.ArtifactStream + "." + node,
		"$JS.API.CONSUMER.MSG.NEXT." + events.ArtifactStream + "." + node,
	}
	// Its reports, each type on its own subject (rule 19): nothing else
	// under its prefix, and nothing under another node's.
	for _, typ := range events.ReportTypes() {
		pub = append(pub, events.ReportSubject(node, typ))
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		// Its own declarations as the stream republishes each once stored
		// (events.StoredPrefix), not their publish, which carries the
		// controller's reply subject; and answers on its own inboxes only: _INBOX.> would let it read every reply on the
		// bus, the operator's included. No consumer at all: a consumer is
		// named, and a name can be guessed or listed by another.
		// Requests for its own programs' logs, which only the operator
		// may publish (OperatorPermissions allows, every other identity's
		// list leaves it out): a node hears no other's.
		Sub: jwt.Permission{Allow: jwt.StringList{events.StoredSubject(node), events.NodeInbox(node) + ".>", events.LogsSubject(node)}},
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

// DefaultLifetime is how long a connection's permissions last on a closed
// bus. The bus then closes it, the client connects again, and the
// controller decides again. A grant the log takes away does not wait for
// it: the controller ends the connections holding it (Cutter); the
// lifetime bounds only what a cut that failed leaves behind.
const DefaultLifetime = 10 * time.Minute

// ModulePermissions is all a running module's identity may do on the bus
// (issue 15), from its manifest: answer its own node's endpoint of each
// service it provides (and the any-provider one), ask any provider's
// endpoint of each service it consumes, read and write its own node's keys
// of its state bucket, and report its own standing as a provider on its
// node. Nothing else: no other node's endpoint (it would take requests
// meant for that machine, and see them), no other service, no stream, no
// other node's state or other module's, no consumer of the event stream,
// no other inbox.
//
// The holder of seats may also take work from each seat's queue (seats: the
// seats this instance holds now; a handover cuts its connection, and the
// next is decided without the seat).
func ModulePermissions(node, module string, m manifest.Manifest, seats ...string) jwt.Permissions {
	pub := jwt.StringList{
		// Its standing, for itself on its node (the fold checks the
		// provider named is this module, signed by this identity).
		events.ReportSubject(node, events.ProviderFailing{}.EventType()),
		events.ReportSubject(node, events.ProviderRecovered{}.EventType()),
		"$JS.API.INFO",
	}
	pub = append(pub, stateGrants(node, module)...)
	pub = append(pub, seatGrants(seats)...)
	sub := jwt.StringList{events.ModuleInbox(node, module) + ".>"}
	for _, req := range m.Provides {
		sub = append(sub, events.ServiceSubject(req, node), events.ServiceSubject(req, events.ServiceAny))
	}
	for _, req := range m.Consumes {
		// Asking, with the answer on its own inbox: it hears no request.
		pub = append(pub, events.ServiceEndpoints(req))
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		Sub: jwt.Permission{Allow: sub},
		// Answering a request is publishing once to its reply subject.
		Resp: &jwt.ResponsePermission{MaxMsgs: 1},
	}
}

// stateGrants are what the instance on node may do with its module's
// state bucket: the keys under its node's prefix, and nothing that names
// no key. Reads are by subject (a direct get of a key's last value, a
// consumer whose filter is in its create subject), so the bus can hold them
// to the prefix; a get by sequence (a key's revision) names no key and is
// refused. The bucket's information is granted because binding to a
// bucket asks for it: it says how many keys each subject holds, not their
// values.
func stateGrants(node, module string) []string {
	bucket := events.StateBucket(module)
	kv := "KV_" + bucket
	keys := "$KV." + bucket + "." + events.StatePrefix(node) + ">"
	return []string{
		keys, // puts, deletes and purges of its own keys
		"$JS.API.STREAM.INFO." + kv,
		"$JS.API.DIRECT.GET." + kv + "." + keys,
		"$JS.API.CONSUMER.CREATE." + kv + ".*." + keys,
		"$JS.API.CONSUMER.DELETE." + kv + ".*",
		"$JS.FC." + kv + ".>",
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
