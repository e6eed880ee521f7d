package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// constsOf are the string constants of the given type declared in the
// package in dir, by value: what the compiler knows as the type's values.
func constsOf(t *testing.T, dir, typ string) []string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != typ {
					return true
				}
				for _, v := range spec.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						out = append(out, s)
					}
				}
				return true
			})
		}
	}
	return out
}

// Every State constant is listed in States and said to be well or not in
// stateWell: a state added without that is missed by status's verdict,
// metrics and the page. Fails when one is not.
func TestEveryStateIsHandled(t *testing.T) {
	consts := constsOf(t, ".", "State")
	if len(consts) < len(States) {
		t.Fatalf("found %d State constants, fewer than the %d States lists", len(consts), len(States))
	}
	for _, c := range consts {
		if _, ok := stateWell[State(c)]; !ok {
			t.Errorf("state %q is not in stateWell: say whether a node in it leaves the mesh well", c)
		}
		if !slices.Contains(States, State(c)) {
			t.Errorf("state %q is not in States", c)
		}
	}
}
