package wire

import "time"

// TokenRequest makes a token: Node set binds it to one name (mesh node
// enroll, join and rekey make such), Rekey gives that node new keys.
type TokenRequest struct {
	CommandID    string            `json:"command_id"`
	Uses         int               `json:"uses"`
	Expires      time.Duration     `json:"expires"`
	Labels       map[string]string `json:"labels"`
	Capabilities []string          `json:"capabilities"`
	Node         string            `json:"node"`
	Rekey        bool              `json:"rekey"`
}

// TokenReply is the token made, and the identity an agent joins with: the
// only time its secret is said.
type TokenReply struct {
	Token    Token    `json:"token"`
	Seq      uint64   `json:"seq"`
	Identity Identity `json:"identity"`
}

// TokenList is every token the log knows (never a secret), with the mesh
// and the controller key a join string names.
type TokenList struct {
	Mesh   string  `json:"mesh"`
	Key    string  `json:"key"`
	Tokens []Token `json:"tokens"`
}
