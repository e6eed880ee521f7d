// Package operators is the service of the mesh's operators (issue 33):
// adding one with a role and the public half of a key its command made,
// listing and showing them, removing one (which ends its live connections
// at once), the first admin a closed mesh makes for its home, and the
// check every verb's endpoint makes of its caller (Authorize): the role
// the operator whose key the call came under has, against the role the
// verb needs (wire.Needs). The bus enforces the same (busauth), so each
// is a second wall behind the other.
package operators
