package daemon

import (
	"cmp"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/commands/reconcile"
)

// reconcileFlag turns the reconciler on (rule 27) and bounds it. Off by
// default: a controller that sends by itself is a choice the operator
// makes, since "what was each machine told" then has a second sender.
type reconcileFlag struct {
	Reconcile     bool   `help:"Send behind nodes their latest declaration without a mesh push (recorded as sent by the reconciler; a module's manifest says reconcile never, behind or always)."`
	ReconcileRate string `name:"reconcile-rate" placeholder:"N/D" help:"With --reconcile: at most N declarations every D (1000/1m; N alone: a second). Default 50/1s."`
}

// defaultRate bounds a reconciler given no --reconcile-rate: fifty
// declarations a second sends a change over ten thousand nodes in under
// four minutes, while a push of as many takes the bus seconds.
const defaultRate = "50/1s"

// config is the reconciler's configuration; the zero one (off) without
// --reconcile. A rate without --reconcile is refused: whoever gave it
// believes the reconciler is on.
func (f reconcileFlag) config() (reconcile.Config, error) {
	if !f.Reconcile {
		if f.ReconcileRate != "" {
			return reconcile.Config{}, cmdline.Usagef("--reconcile-rate %s bounds the reconciler, which is off: add --reconcile to turn it on", f.ReconcileRate)
		}
		return reconcile.Config{}, nil
	}
	rate, every, err := parseRate(cmp.Or(f.ReconcileRate, defaultRate))
	if err != nil {
		return reconcile.Config{}, cmdline.Usagef("--reconcile-rate %s: %s; give N/D, at least 1 declaration every 10ms or more, such as 50/1s or 1000/1m", f.ReconcileRate, err)
	}
	return reconcile.Config{Rate: rate, Every: every}, nil
}

// parseRate reads N or N/D (D a Go duration, or a unit alone: s, m, h).
func parseRate(s string) (int, time.Duration, error) {
	n, d, per := strings.Cut(s, "/")
	rate, err := strconv.Atoi(n)
	if err != nil || rate < 1 {
		return 0, 0, errors.New("the count is not a whole number of at least 1")
	}
	every := time.Second
	if per {
		if d == "s" || d == "m" || d == "h" {
			d = "1" + d
		}
		if every, err = time.ParseDuration(d); err != nil || every < 10*time.Millisecond {
			return 0, 0, errors.New("the window is not a duration of at least 10ms")
		}
	}
	return rate, every, nil
}
