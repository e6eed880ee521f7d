package push_test

import (
	"testing"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/core/coretest"
)

// benchMesh is coretest's mesh with the handlers made over its fold.
type benchMesh struct {
	*coretest.Mesh
	h *commands.Services
}

func newBenchMesh(b testing.TB, inProcess bool) *benchMesh {
	return &benchMesh{Mesh: coretest.New(b, inProcess)}
}

func newClusterBenchMesh(b testing.TB) *benchMesh { return &benchMesh{Mesh: coretest.NewCluster(b)} }

// fold folds what was published and makes handlers over it.
func (m *benchMesh) fold() *commands.Services {
	m.h = commands.NewServices(m.Fold(), nil, nil)
	return m.h
}
