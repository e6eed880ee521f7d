package text

import (
	"fmt"

	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// RolloutLine says where a rollout stands, in one line.
func RolloutLine(r wire.Rollout) string {
	line := fmt.Sprintf("%s  %s build %s  %s", r.ID, r.Module, manifest.ShortBuild(r.Build), r.State)
	if r.Auto {
		line = fmt.Sprintf("%s  %s build %s (started by itself: policy auto)  %s", r.ID, r.Module, manifest.ShortBuild(r.Build), r.State)
	}
	if r.Wave >= 0 {
		line += fmt.Sprintf(", wave %d of %d (%s)", r.Wave+1, len(r.Waves), r.Waves[r.Wave].Name)
	}
	if r.Node != "" {
		line += fmt.Sprintf(": halted by %s: %s", r.Node, r.Why)
	}
	if r.Reverted {
		line += "; that wave was sent back to the builds it had"
	}
	return line
}
