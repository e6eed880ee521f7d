package text

import "time"

// Time is how every time is printed, for people and scripts alike: RFC 3339
// in UTC, to the second. One form, so that a script reading text output, a
// person comparing two lines and the --json answers (whose times encode as
// RFC 3339 too) never meet a second one; UTC, so that two machines' outputs
// compare.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339) }
