package cmdline

// NonNil is a list as --json prints it: [] when empty, never null, so that a
// script can take its length or range over it without a case for null (the
// README's "Scripting": every list sits under its named key, as a list).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
