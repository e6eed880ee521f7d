package compose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/manifest"
)

// unitLeftOut says whether r is a unit a node without systemd cannot run,
// and the sentence saying so. Only the unit is left out: the rest of its
// module (its files, its program) still reaches the node, as a module a
// node cannot host is left out and the rest of the node still composes
// (rule 8). The node is then partial, as it is then.
func unitLeftOut(module string, r manifest.Resource, n Node) (LeftOut, bool) {
	if r.Kind != manifest.KindUnit || slices.Contains(n.Capabilities, manifest.UnitCapability) {
		return LeftOut{}, false
	}
	has := "none"
	if len(n.Capabilities) > 0 {
		has = strings.Join(n.Capabilities, ", ")
	}
	return LeftOut{Module: module, Unit: r.Name, Reason: fmt.Sprintf("unit %s of %s needs %s, %s has %s (its agent reports %s where systemd runs the machine)",
		r.Name, module, manifest.UnitCapability, n.Name, has, manifest.UnitCapability)}, true
}
