// Package wire is the controller's protocol on the bus: the subject of each
// verb (mesh.api.<group>.<verb>), the JSON of its request and its answer,
// the headers that carry a refusal's code and kind, and the chunk protocol
// that carries an answer larger than one message.
//
// It exists so that whoever only speaks to a controller (the client, most
// of the command line, a tool of an operator's own) links the protocol and
// nothing of what serves it: commands and projections bring Pebble (58
// packages) and the controller's whole decision code. So wire imports
// neither Pebble nor nats-server, nor commands or projections; the read
// models' rows that answers carry whole (a token, a rollout, a seat) are
// declared here and named by aliases in projections. The layout test holds
// it to that.
//
// These types are the stable schema of the controller's answers and of
// `--json` output: a change to a field's name or tag is a change of
// protocol, which the command line's golden files catch.
//
// One name per number, and one form per time, in every type here (the
// README's "Scripting" says so to scripts, and cmd/mesh's
// TestEveryJSONAnswerFollowsTheOneRule holds every answer to it): "seq" is
// an event's stream sequence, its place in the log ("enrolled_seq" and the
// like name whose it is); "sequence" is a declaration's number among its
// node's. A second name for either (a "stream_seq") would make a script
// guess which number it holds. Times are time.Time, which encodes as
// RFC 3339; the controller's clock is UTC, so they carry Z.
package wire
