package commands_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
)

func TestZZFloodScratch(t *testing.T) {
	m := newClosedMesh(t, 0)
	j := m.enrollAndDeclare("flood")
	nc, err := m.connectAs(j, nil)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 60000)
	for i := range junk {
		junk[i] = 'x'
	}
	end := time.Now().Add(time.Second)
	n := 0
	for time.Now().Before(end) {
		nc.Publish("mesh.rp.flood.DeclarationApplied", junk)
		n++
	}
	nc.Flush()
	t.Logf("published %d", n)
	ctx := context.Background()
	var v commands.Verified
	embeddedtest.Eventually(t, "fold", func() bool {
		st, _ := m.h.ProjectionsStatus(ctx, commands.Empty{})
		return st.Lag == 0
	})
	v, err = m.h.VerifyProjections(ctx, commands.FoldRequest{})
	t.Logf("verify: %+v err %v", v, err)
}
