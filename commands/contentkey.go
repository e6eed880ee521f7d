package commands

import (
	"encoding/json"

	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/nats-io/nats.go"
)

// serveContentKeys answers agents asking for the content keys of their
// files that printed secret settings (issue 29 point 6, compose.Sealed).
// A key is made afresh from the salts at each ask and kept nowhere: once a
// salt is erased, the answer for a file that printed its setting is a
// refusal, and no key anywhere opens the file from the log.
func serveContentKeys(h *Services) (stop func(), err error) {
	return answerAgents(h.Core, events.ContentKeyPrefix,
		func(node string, data []byte) *nats.Msg { return jsonAnswer(h.Credentials.ContentKeys(node, data)) },
		func(why string) *nats.Msg { return jsonAnswer(declaration.ContentKeyReply{Error: why}) })
}

// jsonAnswer is an answer to an agent: v, which holds only strings,
// numbers and lists of them, so it always encodes.
func jsonAnswer(v any) *nats.Msg {
	m := nats.NewMsg("")
	m.Data, _ = json.Marshal(v)
	return m
}
