package reconcile_test

import (
	"os"
	"testing"

	"github.com/meshctl/mesh/embedded/embeddedtest"
)

// TestMain runs the tests with their temporary directories in memory where
// the box allows (see embeddedtest.Main).
func TestMain(m *testing.M) { os.Exit(embeddedtest.Main(m)) }
