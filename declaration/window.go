package declaration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
)

// A window is declarations signed together: one ed25519 signature over the
// root of a Merkle tree (RFC 9162's, section 2.1) whose leaves are the
// declarations' canonical bytes. Each declaration travels with its proof
// (its leaf's salt, its place, and the hashes of the subtrees beside its
// path), so its node verifies it alone, as before, with one signature
// check: nothing of the other declarations but hashes is needed or seen.
//
// Why (issue 34): signing was a sixth of the controller's CPU a pushed
// node, one 20 µs signature each; a window of WindowSize shares one, for
// about 1.5 µs of hashing a node and a proof of 146 bytes. The figures are
// in docs/performance.md, "Signing a window".

// WindowSize is how many declarations a push signs together. Sixteen
// leaves make a proof of four hashes; more would save under a microsecond
// a node while each proof, carried in every send on the bus, grows by 32
// bytes a doubling.
const WindowSize = 16

// saltSize is each leaf's random salt. Without it a node could test a
// guess at another node's declaration (a first send, whose chain and time
// it can guess) against the hash beside its own path.
const saltSize = 16

// rootPrefix begins every message a window's signature covers. A single
// declaration's signature covers its canonical bytes, which begin with
// '{': the two kinds of signed message can never be the same bytes, so no
// signature of one kind can be passed off as the other.
const rootPrefix = "mesh declaration window v1\n"

// ErrProof refuses a proof that cannot be read or does not fit its place.
var ErrProof = errors.New("the declaration's window proof is malformed")

// SealMany signs ds as one window: one Sealed each, in order, all carrying
// the one signature over the window's root and each its own proof. One
// declaration alone is sealed as Seal seals it, with no proof.
func (s *Signer) SealMany(ds []Declaration) []Sealed {
	bs := make([][]byte, len(ds))
	for i, d := range ds {
		bs[i] = d.Canonical()
	}
	return s.SealManyBytes(bs)
}

// SealManyBytes is SealMany of declarations already in their canonical
// bytes (Declaration.CanonicalFrom, as a push makes them from what compose
// encoded): each of bs must be exactly its declaration's Canonical(), since
// those are the bytes signed, sent and digested.
func (s *Signer) SealManyBytes(bs [][]byte) []Sealed {
	out := make([]Sealed, len(bs))
	if len(bs) == 1 {
		out[0] = Sealed{Bytes: bs[0], Signature: ed25519.Sign(s.priv, bs[0]), Key: s.pub}
		return out
	}
	salts := make([]byte, saltSize*len(bs))
	_, _ = rand.Read(salts) // crypto/rand never fails (Go 1.24 and later)
	leaves := make([][sha256.Size]byte, len(bs))
	for i, b := range bs {
		out[i].Bytes = b
		leaves[i] = leafHash(salts[i*saltSize:(i+1)*saltSize], out[i].Bytes)
	}
	// Each path in one backing array, room for its whole depth (the
	// tree's, ceil(log2 n)) and no more, so that a path's appends never
	// reach its neighbour's: grown hash by hash they were three
	// allocations a declaration.
	paths := make([][][sha256.Size]byte, len(bs))
	depth := bits.Len(uint(len(bs) - 1))
	hashes := make([][sha256.Size]byte, len(bs)*depth)
	for i := range paths {
		paths[i] = hashes[i*depth : i*depth : (i+1)*depth]
	}
	root := subtree(leaves, paths)
	sig := ed25519.Sign(s.priv, rootMessage(root, len(bs)))
	for i := range out {
		out[i].Signature, out[i].Key = sig, s.pub
		out[i].Proof = encodeProof(salts[i*saltSize:(i+1)*saltSize], i, len(bs), paths[i])
	}
	return out
}

// SignedMessage is what the signature of a declaration sealed with proof
// covers: the declaration's own bytes when proof is empty (sealed alone),
// else the root its proof leads to from those bytes (rootMessage).
// Open and audit check the signature against it; an error is ErrProof.
func SignedMessage(decl, proof []byte) ([]byte, error) {
	if len(proof) == 0 {
		return decl, nil
	}
	if len(proof) < saltSize {
		return nil, ErrProof
	}
	salt, rest := proof[:saltSize], proof[saltSize:]
	index, n := binary.Uvarint(rest)
	if n <= 0 {
		return nil, ErrProof
	}
	rest = rest[n:]
	size, n := binary.Uvarint(rest)
	if n <= 0 || index >= size || (len(rest)-n)%sha256.Size != 0 {
		return nil, ErrProof
	}
	rest = rest[n:]
	// RFC 9162, 2.1.3.2: walk from the leaf to the root; fn and sn are the
	// leaf's and the last leaf's places at each level.
	fn, sn, r := index, size-1, leafHash(salt, decl)
	for ; len(rest) > 0; rest = rest[sha256.Size:] {
		var p [sha256.Size]byte
		copy(p[:], rest)
		if sn == 0 {
			return nil, ErrProof
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return nil, ErrProof
	}
	return rootMessage(r, int(size)), nil
}

// subtree is RFC 9162's MTH over leaves; it appends to each leaf's path
// the hash of every subtree beside it, from the leaf up.
func subtree(leaves [][sha256.Size]byte, paths [][][sha256.Size]byte) [sha256.Size]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1) // the largest power of two below len
	l, r := subtree(leaves[:k], paths[:k]), subtree(leaves[k:], paths[k:])
	for i := range paths[:k] {
		paths[i] = append(paths[i], r)
	}
	for i := k; i < len(paths); i++ {
		paths[i] = append(paths[i], l)
	}
	return nodeHash(l, r)
}

// leafHash and nodeHash are RFC 9162's, with a 0x00 and a 0x01 before the
// hashed bytes so that no leaf can pass for an inner node.
func leafHash(salt, decl []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(salt)
	h.Write(decl)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func nodeHash(l, r [sha256.Size]byte) [sha256.Size]byte {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[1+sha256.Size:], r[:])
	return sha256.Sum256(b[:])
}

// rootMessage is what a window's signature covers: the prefix, the
// window's size and its root. The size is signed so that a proof's every
// byte is: sizes whose trees give a leaf the same path (10 and 11 for the
// sixth) would otherwise both open.
func rootMessage(root [sha256.Size]byte, size int) []byte {
	out := binary.AppendUvarint([]byte(rootPrefix), uint64(size))
	return append(out, root[:]...)
}

// encodeProof is salt, the leaf's place and the window's size (uvarints),
// then the path's hashes.
func encodeProof(salt []byte, index, size int, path [][sha256.Size]byte) []byte {
	out := make([]byte, 0, saltSize+2*binary.MaxVarintLen16+len(path)*sha256.Size)
	out = append(out, salt...)
	out = binary.AppendUvarint(out, uint64(index))
	out = binary.AppendUvarint(out, uint64(size))
	for _, p := range path {
		out = append(out, p[:]...)
	}
	return out
}
