package nodes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// secretsNeedAdmin refuses an assignment that sets or unsets a secret
// setting of m (its value is sealed for the node) unless the operator who
// asked is an admin (issue 33: secrets are the admin's to set and forget;
// a deployer assigns and pushes). The caller is who the endpoint proved
// (events.ByOf): none on an open bus, which proves no one, and the
// controller's own names, which act for no operator, pass.
func secretsNeedAdmin(ctx context.Context, v *projections.View, module string, m manifest.Manifest, settings map[string]string, unset []string) error {
	by := events.ByOf(ctx)
	if by == "" {
		return nil
	}
	var secret []string
	for name := range settings {
		if m.Settings[name].Secret {
			secret = append(secret, name)
		}
	}
	for _, name := range unset {
		if m.Settings[name].Secret && !slices.Contains(secret, name) {
			secret = append(secret, name)
		}
	}
	if len(secret) == 0 {
		return nil
	}
	o, found, err := v.Operator(by)
	if err != nil || !found || o.Role.Allows(events.RoleAdmin) {
		return err
	}
	slices.Sort(secret)
	return aggregates.Refuse("assign", module, aggregates.ErrForbidden, fmt.Sprintf(
		"%s is a %s, and setting the secret setting(s) %s needs the %s role (an admin sets them, or gives the role with mesh operator add NAME --role %s)",
		o.Name, o.Role, strings.Join(secret, ", "), events.RoleAdmin, events.RoleAdmin))
}
