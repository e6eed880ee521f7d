package declaration

// Content keys (issue 29, point 6). A file that printed secret settings
// travels sealed twice: under a key made of the settings' salts
// (secret.ContentKey), and that box sealed to the node. The agent asks the
// controller for the first key on events.ContentKeySubject at each apply;
// the controller derives it from the salts, which only it can read, and
// answers it sealed to the node (secret.ContentKeyPlace). The key is in no
// log and no backup, and the agent keeps it only in memory: once a salt is
// erased (mesh secret forget) nobody can make it again.

// ContentKeyRequest asks for the content keys of some of the node's files.
type ContentKeyRequest struct {
	Files []ContentKeyAsk `json:"files"`
}

// ContentKeyAsk is one file: its path and the salt ids its declaration
// names (compose.Sealed.Keys).
type ContentKeyAsk struct {
	Path  string   `json:"path"`
	Salts []string `json:"salts"`
}

// ContentKeyReply answers each file asked, in the order asked, or Error
// (one sentence) when the controller cannot answer now: the agent then
// asks again, and applies nothing meanwhile.
type ContentKeyReply struct {
	Files []ContentKeyGiven `json:"files,omitempty"`
	Error string            `json:"error,omitempty"`
}

// ContentKeyGiven is one file's key, sealed to the node, or Refused: why
// it cannot be made (a salt forgotten), which the agent reports as that
// file's failure.
type ContentKeyGiven struct {
	Path    string `json:"path"`
	Box     string `json:"box,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// MaxContentKeyFiles bounds one request: a declaration past it asks in
// several. It keeps an answer well under the bus's message size.
const MaxContentKeyFiles = 256
