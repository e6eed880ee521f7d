package compose

import (
	"fmt"
	"slices"
	"strings"
)

// Chosen is one provider a consumer receives for one requirement, and why
// that one: what plan, node show and status say. It is not in the
// declaration, whose bytes a reason's wording must not move.
type Chosen struct {
	Receipt
	Why string `json:"why"`
}

// choice is what one consumer receives for one requirement: the providers
// (one, or every one under "all") and why, or why none (unresolved).
type choice struct {
	providers  []placed
	why        string
	unresolved string
}

// serves reports whether p is among the providers chosen.
func (c choice) serves(p placed) bool {
	return slices.ContainsFunc(c.providers, func(q placed) bool { return q.Node == p.Node && q.Module == p.Module })
}

// choose applies c's rule for req (its manifest's choose) to the hostable
// providers, or, with no rule, locality: several providers are never a
// refusal by themselves, only a rule that matches none is. It reads only
// the world, so a provider and each of its consumers, composed apart,
// agree on who serves whom, and so on whose credential each end holds.
func (w *World) choose(c placed, req string) choice {
	cands := w.candidates(c, req)
	if len(cands) == 0 {
		reason := fmt.Sprintf("%s needs %s, which no assigned module provides", c.Module, req)
		if blocked := w.blocked[req]; len(blocked) > 0 {
			reason = fmt.Sprintf("%s needs %s, whose only provider%s cannot be hosted: %s", c.Module, req, plural(blocked), needs(blocked[0], w.node(blocked[0].Node)))
		}
		return choice{unresolved: reason}
	}
	rule := c.m.Choose[req]
	switch {
	case rule.All:
		return choice{providers: cands, why: "all"}
	case rule.Node != "":
		on := slices.DeleteFunc(slices.Clone(cands), func(p placed) bool { return p.Node != rule.Node })
		if len(on) == 0 {
			return choice{unresolved: fmt.Sprintf("%s on %s chooses its %s on node %s, where no hostable module provides it (%s: %s); assign a provider there or change the rule",
				c.Module, c.Node, req, rule.Node, providersSay(cands), w.placesOf(cands, ""))}
		}
		return choice{providers: on[:1], why: "by name"}
	case rule.Label != "":
		mine, ok := w.node(c.Node).Labels[rule.Label]
		if !ok {
			return choice{unresolved: fmt.Sprintf("%s on %s chooses its %s by label %s, which %s does not have; give %s that label (mesh node set) or change the rule",
				c.Module, c.Node, req, rule.Label, c.Node, c.Node)}
		}
		same := slices.DeleteFunc(slices.Clone(cands), func(p placed) bool {
			v, ok := w.node(p.Node).Labels[rule.Label]
			return !ok || v != mine
		})
		if len(same) == 0 {
			return choice{unresolved: fmt.Sprintf("%s on %s chooses its %s by %s=%s, which no provider's node has (%s); assign one on a node with %s=%s or change the rule",
				c.Module, c.Node, req, rule.Label, mine, w.placesOf(cands, rule.Label), rule.Label, mine)}
		}
		p, _ := w.nearest(c, same)
		return choice{providers: []placed{p}, why: fmt.Sprintf("shares %s=%s", rule.Label, mine)}
	}
	p, why := w.nearest(c, cands)
	return choice{providers: []placed{p}, why: why}
}

// nearest is the default (no rule): the provider on c's own node if there
// is one, else the one whose node shares the most labels (key and value)
// with c's node, ties broken by node name, then module (cands are sorted
// so). Never a refusal: a fleet with a database in each zone composes.
func (w *World) nearest(c placed, cands []placed) (placed, string) {
	if i := slices.IndexFunc(cands, func(p placed) bool { return p.Node == c.Node }); i >= 0 {
		return cands[i], "same node"
	}
	if len(cands) == 1 {
		return cands[0], "only provider"
	}
	mine := w.node(c.Node).Labels
	best, shared := 0, []string(nil)
	for i, p := range cands {
		var s []string
		for k, v := range w.node(p.Node).Labels {
			if mv, ok := mine[k]; ok && mv == v {
				s = append(s, k+"="+v)
			}
		}
		if i == 0 || len(s) > len(shared) {
			best, shared = i, s
		}
	}
	if len(shared) == 0 {
		return cands[best], "first by node name, none shares a label"
	}
	slices.Sort(shared)
	return cands[best], "closest by labels: shares " + strings.Join(shared, ", ")
}

// placesOf names each provider with its node's value of label, when one is
// given: "postgres on db-1 (zone=us), postgres on db-2 (no zone)". The
// first few only: a reason is one sentence, however many providers.
func (w *World) placesOf(ps []placed, label string) string {
	const most = 5
	names := make([]string, 0, min(len(ps), most)+1)
	for i, p := range ps {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(ps)-most))
			break
		}
		s := p.Module + " on " + p.Node
		if label != "" {
			if v, ok := w.node(p.Node).Labels[label]; ok {
				s += fmt.Sprintf(" (%s=%s)", label, v)
			} else {
				s += " (no " + label + ")"
			}
		}
		names = append(names, s)
	}
	return strings.Join(names, ", ")
}

func providersSay(ps []placed) string {
	if len(ps) == 1 {
		return "its provider is"
	}
	return "its providers are"
}

// Linked are the nodes node's modules could exchange a requirement with,
// chosen or not: those hosting a hostable provider of what they consume or
// a consumer of what they provide. A named push sends those of them whose
// declaration changed with it (push's consequence), so a provider a
// consumer has left drops it in the same push as the one it chose.
func (w *World) Linked(node string) map[string]bool {
	out := map[string]bool{}
	for _, p := range w.assigned(node) {
		if p.m == nil {
			continue
		}
		for _, r := range p.m.Consumes {
			for _, q := range w.providers[r] {
				out[q.Node] = true
			}
		}
		for _, r := range p.m.Provides {
			for _, c := range w.consumers[r] {
				out[c.Node] = true
			}
		}
	}
	delete(out, node)
	return out
}
