package manifest

import (
	"fmt"
	"text/template"
	"text/template/parse"
)

// Bounds on what a template may make composition do (issue 12: a template
// with a two-million-step loop took the controller from 160 to 401 MB).
// A template runs inside the controller at every composition, so what it
// costs is bounded before it is ever registered, and its output while it runs.
const (
	// MaxRangeSteps bounds the steps of ranges over a number, nested ones
	// multiplied ({{range 1000}}{{range 1000}} is a million). A range over
	// the node's or a provider's data is bounded by that data.
	MaxRangeSteps = 1_000_000
	// MaxRendered bounds one rendered file: past it composition stops the
	// template and names the bound.
	MaxRendered = 1 << 20
)

// checkBounds refuses a template whose work is not bounded: one that
// defines or calls other templates (a template calling itself in a range
// grows exponentially with its depth), or whose ranges over numbers take
// more than MaxRangeSteps steps.
func checkBounds(t *template.Template) error {
	if len(t.Templates()) > 1 {
		return fmt.Errorf("defines a template of its own ({{define}}); a resource's template is one template")
	}
	if t.Tree == nil {
		return nil
	}
	return walkBounds(t.Tree.Root, 1)
}

func walkBounds(n parse.Node, steps int64) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := walkBounds(c, steps); err != nil {
				return err
			}
		}
	case *parse.TemplateNode:
		return fmt.Errorf("calls template %q ({{template}}); a resource's template is one template", n.Name)
	case *parse.RangeNode:
		inner := steps
		if k, ok := rangeCount(n.Pipe); ok {
			inner = steps * max(k, 1)
			if k > MaxRangeSteps || inner > MaxRangeSteps {
				return fmt.Errorf("ranges over %d steps in all; at most %d", inner, MaxRangeSteps)
			}
		}
		if err := walkBounds(n.List, inner); err != nil {
			return err
		}
		return walkBounds(n.ElseList, steps)
	case *parse.IfNode:
		if err := walkBounds(n.List, steps); err != nil {
			return err
		}
		return walkBounds(n.ElseList, steps)
	case *parse.WithNode:
		if err := walkBounds(n.List, steps); err != nil {
			return err
		}
		return walkBounds(n.ElseList, steps)
	}
	return nil
}

// rangeCount is the count of a range over a number literal.
func rangeCount(p *parse.PipeNode) (int64, bool) {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return 0, false
	}
	num, ok := p.Cmds[0].Args[0].(*parse.NumberNode)
	if !ok || !num.IsInt {
		return 0, false
	}
	return num.Int64, true
}
