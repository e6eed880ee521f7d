// Package secret seals what the mesh must never keep or send in clear: the
// value of a secret setting as the log holds it, a rendered file holding a
// secret as a declaration carries it, and the credentials the mesh mints.
//
// Every key is derived (by the declaration package's keyring) from key
// material the mesh already has, so no new secret is made, sent or backed
// up: the controller key, and a node's join string. Sealing is AES-256-GCM
// with a random nonce, so the same value sealed twice is two different
// boxes, and the additional data names where a box belongs, so a box moved
// to another node, path or setting does not open. Nothing here keeps a
// digest of a clear value: a digest anyone can compute would let a reader
// of the log test guesses (rule 21).
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrOpen is a box that does not open: the wrong key, the wrong place, or
// bytes changed on the way.
var ErrOpen = errors.New("the sealed value does not open with this key here (another key, another place, or changed bytes)")

// Seal encrypts clear under key for the place where (AES-256-GCM, a random
// nonce before the ciphertext), in unpadded base64url.
func Seal(key []byte, where string, clear []byte) string {
	aead := gcm(key)
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(clear)+aead.Overhead())
	// crypto/rand.Read never fails (it panics if the system has no source).
	rand.Read(out)
	out = aead.Seal(out, out, clear, []byte(where))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open decrypts a box Seal made for where under key.
func Open(key []byte, where, box string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(box)
	aead := gcm(key)
	if err != nil || len(b) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrOpen
	}
	clear, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(where))
	if err != nil {
		return nil, ErrOpen
	}
	return clear, nil
}

// gcm is AES-256-GCM under the sha256 of key: every key here is 32 bytes
// already, and hashing makes any length one AES-256 key.
func gcm(key []byte) cipher.AEAD {
	k := sha256.Sum256(key)
	block, _ := aes.NewCipher(k[:]) // 32 bytes: always a valid key
	aead, _ := cipher.NewGCM(block) // a 16-byte block cipher: always GCM
	return aead
}

// MAC is a keyed digest of parts, each length-prefixed so that no two lists
// of parts write the same bytes. Without the key nobody can compute it, so
// it shows that sealed content changed without letting anyone test a guess.
func MAC(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(strconv.Itoa(len(p)) + ":"))
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Where is the additional data naming a place: its parts joined by NUL,
// which no name, path or setting holds.
func Where(parts ...string) string { return strings.Join(parts, "\x00") }

// FilePlace is the place of a file's sealed content: the node it is for
// and its path. The controller seals and the agent opens at this one place,
// so a box copied into another node's declaration or path does not open.
func FilePlace(node, path string) string { return Where("file", node, path) }

// Setting is a secret setting's value as the log and the read models hold
// it: which version of the setting it is, the key it is sealed under, and
// the box. Its string form stands where a setting's clear value would be.
type Setting struct {
	Version int
	Key     string // the id of the secret key it is sealed under
	Box     string
}

// settingPrefix begins every sealed setting. A clear setting beginning with
// it is refused (manifest and assign), so the two are never confused.
const settingPrefix = "sealed:"

// String is the form the log keeps: sealed:1:V:KEY:BOX (1 is the format).
func (s Setting) String() string {
	return fmt.Sprintf("%s1:%d:%s:%s", settingPrefix, s.Version, s.Key, s.Box)
}

// Shown is what people see of it: that it is set, and which version.
func (s Setting) Shown() string { return fmt.Sprintf("(secret, version %d)", s.Version) }

// IsSealed reports whether a setting's value is a sealed one.
func IsSealed(v string) bool { return strings.HasPrefix(v, settingPrefix) }

// ParseSetting reads a sealed setting's string form.
func ParseSetting(v string) (Setting, error) {
	rest, ok := strings.CutPrefix(v, settingPrefix+"1:")
	parts := strings.Split(rest, ":")
	if !ok || len(parts) != 3 {
		return Setting{}, errors.New("a sealed setting is not in the form sealed:1:VERSION:KEY:BOX")
	}
	n, err := strconv.Atoi(parts[0])
	if err != nil || n < 1 {
		return Setting{}, fmt.Errorf("a sealed setting's version %q is not a positive number", parts[0])
	}
	return Setting{Version: n, Key: parts[1], Box: parts[2]}, nil
}

// Shown is a setting's value as people may see it: a sealed one as that it
// is set and its version, any other as it is.
func Shown(v string) string {
	if !IsSealed(v) {
		return v
	}
	s, err := ParseSetting(v)
	if err != nil {
		return "(secret, unreadable form)"
	}
	return s.Shown()
}

// Mint makes a credential from key and the parts naming it: 32 characters
// of base64url (192 bits). The same key and parts mint the same credential,
// so it is never stored: the controller mints it again when it composes.
func Mint(key []byte, parts ...string) string {
	return MAC(key, parts...)[:32]
}

// sealedToPrefix marks a box sealed to a node's own X25519 key (SealTo):
// its agent opens it with OpenWith, and nothing the controller holds can.
const sealedToPrefix = "x1."

// IsSealedTo reports whether box was made by SealTo.
func IsSealedTo(box string) bool { return strings.HasPrefix(box, sealedToPrefix) }

// SealTo seals clear to the X25519 public key to (standard base64, as the
// log records a node's seal key) for place where: an ephemeral key agrees
// a secret with it, and only to's private half agrees it again. The sealer
// keeps nothing, so neither it nor anyone with its keys or the log can
// open the box afterwards (issue 29).
func SealTo(to, where string, clear []byte) (string, error) {
	b, err := base64.StdEncoding.DecodeString(to)
	if err != nil {
		return "", fmt.Errorf("the seal key %q is not base64", to)
	}
	pub, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return "", fmt.Errorf("the seal key is not an X25519 key: %w", err)
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	shared, err := eph.ECDH(pub)
	if err != nil {
		return "", err
	}
	box := Seal(agreed(shared, eph.PublicKey().Bytes(), b), where, clear)
	return sealedToPrefix + base64.RawURLEncoding.EncodeToString(eph.PublicKey().Bytes()) + "." + box, nil
}

// OpenWith opens a box SealTo made for priv's public key.
func OpenWith(priv *ecdh.PrivateKey, where, box string) ([]byte, error) {
	rest, ok := strings.CutPrefix(box, sealedToPrefix)
	ephB64, inner, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, ErrOpen
	}
	ephRaw, err := base64.RawURLEncoding.DecodeString(ephB64)
	if err != nil {
		return nil, ErrOpen
	}
	eph, err := ecdh.X25519().NewPublicKey(ephRaw)
	if err != nil {
		return nil, ErrOpen
	}
	shared, err := priv.ECDH(eph)
	if err != nil {
		return nil, ErrOpen
	}
	return Open(agreed(shared, ephRaw, priv.PublicKey().Bytes()), where, inner)
}

// agreed is the box key of a shared secret, bound to both public keys.
func agreed(shared, eph, to []byte) []byte {
	m := hmac.New(sha256.New, shared)
	m.Write([]byte("mesh sealed to a node\x00"))
	m.Write(eph)
	m.Write(to)
	return m.Sum(nil)
}

// ContentKey is the key a rendered file's content is sealed under inside
// its box to the node, when the file printed secret settings: made of the
// keys of those settings' salts (in the order of their ids), the node and
// the path. It is derived afresh from the salts each time and kept
// nowhere, so erasing any one of the salts (mesh secret forget) leaves no
// key anywhere that opens the file from the log or from a backup taken
// after, the node's own included (issue 29, point 6). HMAC is one-way: a
// node given the content key of its own file learns nothing of the salt's
// key, which also seals the setting in the log.
func ContentKey(saltKeys [][]byte, node, path string) []byte {
	var all []byte
	for _, k := range saltKeys {
		all = append(all, k...)
	}
	return []byte(MAC(all, "file content", node, path))
}

// ContentKeyPlace is where a content key travels from the controller to a
// node's agent, sealed to that node: bound to the node and the file's path,
// so a key answered for one file opens nothing at another.
func ContentKeyPlace(node, path string) string { return Where("content key", node, path) }
