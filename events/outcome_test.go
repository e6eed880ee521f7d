package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// Every Outcome constant is in Outcomes and is what some report says: an
// outcome added without a report that carries it, or left out of the list
// every reader walks, fails here.
func TestEveryOutcomeIsReported(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	reported := map[Outcome]bool{}
	for _, ev := range []Event{DeclarationApplied{}, DeclarationFailed{}, DeclarationRefused{}} {
		o, ok := OutcomeOf(ev)
		reported[o] = ok
	}
	found := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "Outcome" {
					return true
				}
				for _, v := range spec.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						continue
					}
					s, _ := strconv.Unquote(lit.Value)
					found++
					if !slices.Contains(Outcomes, Outcome(s)) || !reported[Outcome(s)] {
						t.Errorf("outcome %q is not in Outcomes, or no report says it (OutcomeOf)", s)
					}
				}
				return true
			})
		}
	}
	if found != len(Outcomes) {
		t.Fatalf("%d Outcome constants, %d in Outcomes", found, len(Outcomes))
	}
}
