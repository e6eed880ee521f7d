package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections/rows"
	"github.com/meshctl/mesh/projections/scan"
)

// maxDifferences is how many differing rows Verify describes; it counts
// the rest.
const maxDifferences = 20

// Verify folds the whole stream afresh, up to exactly what the live read
// models hold, and answers how the two differ ("" when they are equal).
//
// It streams: the fresh fold goes to a generation on disk beside the live
// one (never in memory), and the two are compared row by row in key order,
// holding one row of each at a time. Two whole copies of the read models in
// memory took 1.29 GiB at a million events.
func (e *Engine) Verify(ctx context.Context, progress func(Progress)) (string, uint64, error) {
	// One long fold at a time: the live snapshot below must outlive
	// neither its database (a rebuild's swap closes it) nor the engine.
	ctx, done := e.long(ctx)
	defer done()
	var live *pebble.Snapshot
	if err := e.view(func(db pebble.Reader) error {
		live = db.(*pebble.DB).NewSnapshot()
		return nil
	}); err != nil {
		return "", 0, err
	}
	defer live.Close()
	if from := readU64(live, keyHistoryFrom); from > 0 {
		// Compared now, every history row still to come would be named.
		return "", 0, &HistoryPending{Through: from}
	}
	at := readCheckpoint(live)
	return e.foldAndCompare(ctx, live, at, e.o.Dir+".verify", progress)
}

// foldAndCompare folds the stream afresh from its first event up to at,
// beside the read models in dir, and answers how held (read models that
// say they are folded up to at) differs from it.
func (e *Engine) foldAndCompare(ctx context.Context, held pebble.Reader, at uint64, dir string, progress func(Progress)) (string, uint64, error) {
	live := held
	if err := e.fs.RemoveAll(dir); err != nil {
		return "", 0, fmt.Errorf("projections: cannot clear %s: %w", dir, err)
	}
	defer e.fs.RemoveAll(dir)
	cp, o, err := e.openChild(ctx, Options{Dir: dir, FS: e.fs, Store: e.o.Store, Keys: e.o.Keys, Log: e.o.Log})
	if err != nil {
		return "", 0, err
	}
	defer cp.Close()
	start := time.Now()
	total := min(at, o.Stream.LastSeq)
	f := cp.newFolder(cp.db, func(last uint64) {
		cp.committed(last)
		if progress != nil {
			progress(Progress{Folded: last, Total: total, Elapsed: time.Since(start)})
		}
	})
	if at > 0 {
		if err := cp.fold(ctx, store.ReadOptions{From: 1, Until: at}, f); err != nil {
			f.discard()
			return "", 0, err
		}
	}
	f.discard()
	var diff string
	err = cp.view(func(fresh pebble.Reader) error {
		if c := readCheckpoint(fresh); c != at {
			return fmt.Errorf("projections: the fresh fold ended at event %d, the live read models are at %d", c, at)
		}
		diff, err = compareRows(live, fresh)
		return err
	})
	return diff, at, err
}

// compareRows walks both read models in key order at once and describes
// every row one holds and the other does not, or holds otherwise. Meta rows
// that belong to a generation rather than to the fold (its identity and
// schema) are not compared.
func compareRows(live, fresh pebble.Reader) (string, error) {
	return compareRowsBut(live, fresh, prefixMeta)
}

// compareRowsBut is compareRows leaving out the read model of prefix
// skip (prefixMeta: none, since meta is compared row by row): a brief
// snapshot against its whole one, skipping the history index.
func compareRowsBut(live, fresh pebble.Reader, skip byte) (string, error) {
	var out strings.Builder
	n := 0
	err := scan.Compare(live, fresh, func(key []byte) bool {
		return generational(key) || skip != prefixMeta && (key[0] == skip || bytes.Equal(key, keyHistoryFrom))
	}, func(key, was, now []byte) {
		n++
		if n <= maxDifferences {
			fmt.Fprintf(&out, "%s:\n  the live read models hold: %s\n  a fresh fold of the stream: %s\n", describeKey(key), describeRow(key, was), describeRow(key, now))
		}
	})
	if err != nil {
		return "", err
	}
	if n > maxDifferences {
		fmt.Fprintf(&out, "and %d more differing row(s)\n", n-maxDifferences)
	}
	return out.String(), nil
}

// generational: a meta row of the generation, not of the fold.
func generational(key []byte) bool {
	return bytes.Equal(key, keyIdentity) || bytes.Equal(key, keySchema)
}

// modelNames names every read model by its prefix, for a person reading
// verify's answer; a prefix missing here shows as "read model 0x..", and
// TestEveryPrefixIsNamed fails when keys.go defines one this table lacks.
var modelNames = map[byte]string{
	prefixMeta: "meta", prefixNode: "node", prefixModule: "module", prefixBuild: "build",
	prefixAssign: "assignment", prefixAssignByModule: "assigned-to index", prefixStanding: "standing",
	prefixHistory: "history of", prefixForeign: "foreign message", prefixForeignOpen: "open foreign message",
	prefixReportKey: "report key of", prefixCredential: "credential rotation", prefixRuntime: "runtime",
	prefixDrift: "drift of", prefixFacts: "facts of", prefixRollout: "rollout", prefixNetwork: "network",
	prefixNodeAddress: "overlay address of", prefixSeat: "seat", prefixLiveness: "liveness of",
	prefixNodeKeys: "own keys of", prefixToken: "enrolment token", prefixFlood: "flood recorded at event",
	prefixArtifact: "artifact", prefixArtifactObject: "artifact object", prefixOperator: "operator",
	prefixHandHeld: "hand-held node",
}

// describeKey names a row for a person: its read model and its names.
func describeKey(key []byte) string {
	if len(key) == 0 {
		return "an empty key"
	}
	model, ok := modelNames[key[0]]
	if !ok {
		model = fmt.Sprintf("read model 0x%02x", key[0])
	}
	rest := key[1:]
	switch key[0] {
	case prefixMeta:
		names := map[byte]string{'c': "checkpoint", 'v': "composition version", 't': "latest moment folded"}
		if len(rest) == 1 && names[rest[0]] != "" {
			return "the " + names[rest[0]]
		}
	case prefixHistory:
		if i := bytes.IndexByte(rest, sep); i >= 0 && len(rest)-i-1 == 8 {
			return fmt.Sprintf("history of %s, event %d", rest[:i], binary.BigEndian.Uint64(rest[i+1:]))
		}
	case prefixNetwork:
		// The pool's row, or an address row keyed by its 16 bytes
		// (addressKey): shown as the address, not as raw bytes.
		if len(rest) == 1 && rest[0] == 'm' {
			return "the network"
		}
		if len(rest) == 17 && rest[0] == 'a' {
			return "network address " + netip.AddrFrom16([16]byte(rest[1:])).Unmap().String()
		}
	case prefixForeign, prefixForeignOpen, prefixFlood:
		if len(rest) == 8 {
			return fmt.Sprintf("%s %d", model, binary.BigEndian.Uint64(rest))
		}
	}
	return model + " " + strings.ReplaceAll(string(rest), string(rune(sep)), "/")
}

// describeRow shows a row's value: decoded where a binary codec (rows) wrote
// it (node and liveness rows), JSON as it is, anything else quoted.
func describeRow(key, v []byte) string {
	if v == nil {
		return "nothing"
	}
	switch key[0] {
	case prefixNode:
		if n, err := rows.DecodeNode(v); err == nil {
			return fmt.Sprintf("%+v", n)
		}
	case prefixLiveness:
		if l, err := rows.DecodeLiveness(string(key[1:]), v); err == nil {
			return fmt.Sprintf("%+v", l)
		}
	case prefixMeta:
		if len(v) == 8 {
			return fmt.Sprint(getU64(v))
		}
	}
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
		return string(v)
	}
	return fmt.Sprintf("%q", v)
}
