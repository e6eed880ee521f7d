package projections

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/mesh/projections/rows"
)

// Every prefix keys.go defines is named in modelNames, so that verify
// names a differing row by its read model. The prefixes are read from
// keys.go itself: a read model added there without its name here fails,
// which a list of prefixes kept in this test would not catch. Two
// prefixes of one value fail too: their rows would mix.
func TestEveryPrefixIsNamed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "keys.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[byte]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "prefix") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s is not a literal byte; this test reads keys.go's literals", name.Name)
				}
				v, err := strconv.ParseUint(lit.Value, 0, 8)
				if err != nil {
					t.Fatalf("%s = %s: %v", name.Name, lit.Value, err)
				}
				if other, dup := seen[byte(v)]; dup {
					t.Errorf("%s and %s are both 0x%02x", other, name.Name, v)
				}
				seen[byte(v)] = name.Name
				if modelNames[byte(v)] == "" {
					t.Errorf("%s (0x%02x) has no name in modelNames (verify.go)", name.Name, v)
				}
			}
		}
	}
	if len(seen) < 23 {
		t.Fatalf("read %d prefixes from keys.go; it defines at least 23", len(seen))
	}
	if len(modelNames) != len(seen) {
		t.Errorf("modelNames names %d prefixes, keys.go defines %d", len(modelNames), len(seen))
	}
}

// A key names its read model and its names, an address row its address.
func TestDescribeKey(t *testing.T) {
	for key, want := range map[string]string{
		string(keyCheckpoint):                          "the checkpoint",
		string(historyKey("web-1", 7)):                 "history of web-1, event 7",
		string(pairKey(prefixRuntime, "web-1", "app")): "runtime web-1/app",
		string(addressKey("10.1.0.8")):                 "network address 10.1.0.8",
		string(keyNetwork):                             "the network",
		string(livenessKey("web-1")):                   "liveness of web-1",
		string(floodKey(9)):                            "flood recorded at event 9",
	} {
		if got := describeKey([]byte(key)); got != want {
			t.Errorf("describeKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// A row a binary codec wrote is shown decoded where verify names a
// difference, not as quoted bytes: a person reads which field differs.
func TestDescribeRowDecodesBinaryRows(t *testing.T) {
	lost := rows.EncodeLiveness(Liveness{Unreachable: true, Bound: 20 * time.Second, Version: 7})
	if got := describeRow(livenessKey("web-1"), lost); !strings.Contains(got, "Node:web-1 Unreachable:true") || !strings.Contains(got, "Bound:20s") {
		t.Errorf("a liveness row is shown as %s", got)
	}
	if got := describeRow(nodeKey("web-1"), rows.EncodeNode(Node{Name: "web-1", Version: 3})); !strings.Contains(got, "Name:web-1") {
		t.Errorf("a node row is shown as %s", got)
	}
}
