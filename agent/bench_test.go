package agent

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/nats-io/nkeys"
)

// BenchmarkVerifyAndApplyUnchanged verifies a signed 50-resource declaration
// and applies it to a root that already holds it: the cost of a push that
// changes nothing on a node. Target: 2 ms or less.
func BenchmarkVerifyAndApplyUnchanged(b *testing.B) {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	d := declaration.Declaration{Mesh: "m", Node: "n", Sequence: 1, ComposedAt: time.Now()}
	for i := range 10 {
		d.Resources = append(d.Resources, compose.Resource{Path: fmt.Sprintf("/etc/m%d", i), Kind: "directory", Mode: "0755", Module: "m"})
		for j := range 4 {
			content := fmt.Sprintf("# file %d of module %d\nkey = value\nport = 80%d\n", j, i, j)
			d.Resources = append(d.Resources, compose.Resource{Path: fmt.Sprintf("/etc/m%d/f%d.conf", i, j), Kind: "file", Mode: "0644", Content: &content, Module: "m"})
		}
	}
	sealed, err := declaration.Seal(kp, d)
	if err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenRoot(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	ap := applier{root: root, state: &State{Owned: map[string]bool{}}}
	if _, failed := ap.apply(d.Resources); len(failed) > 0 {
		b.Fatal(failed)
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := declaration.Open(sealed, pub, "m", "n")
		if err != nil {
			b.Fatal(err)
		}
		if changed, failed := ap.apply(got.Resources); changed != 0 || len(failed) > 0 {
			b.Fatalf("changed %d, failed %v on an unchanged root", changed, failed)
		}
	}
}
