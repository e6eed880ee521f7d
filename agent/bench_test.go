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

// BenchmarkDriftCheck is the agent's drift check of 1,000 owned files (in
// 50 directories) that nobody changed, beside a bare stat of the same
// files in the same run: the check also reads and compares the content
// of each file whose stat moved since it was last found right (the first
// check after an apply reads them all). Target (issue 15): 20 ms or
// less.
func BenchmarkDriftCheck(b *testing.B) {
	var resources []compose.Resource
	for i := range 50 {
		resources = append(resources, compose.Resource{Path: fmt.Sprintf("/etc/m%d", i), Kind: "directory", Mode: "0755", Module: "m"})
		for j := range 20 {
			content := fmt.Sprintf("# file %d of module %d\nkey = value\nport = 80%d\n", j, i, j)
			resources = append(resources, compose.Resource{Path: fmt.Sprintf("/etc/m%d/f%d.conf", i, j), Kind: "file", Mode: "0644", Content: &content, Module: "m"})
		}
	}
	dir := b.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	ap := applier{root: root, state: &State{Owned: map[string]bool{}}, verified: map[string]fileStat{}}
	if _, failed := ap.apply(resources); len(failed) > 0 {
		b.Fatal(failed)
	}
	ap.drifted(resources, nil) // the first check reads every file, as after an apply
	var check, stat time.Duration
	for b.Loop() {
		t0 := time.Now()
		if d := ap.drifted(resources, nil); len(d) != 0 {
			b.Fatalf("%d resource(s) drifted on an unchanged root", len(d))
		}
		t1 := time.Now()
		for _, r := range resources {
			if _, err := os.Lstat(dir + r.Path); err != nil {
				b.Fatal(err)
			}
		}
		check, stat = check+t1.Sub(t0), stat+time.Since(t1)
	}
	b.ReportMetric(float64(check.Microseconds())/1000/float64(b.N), "ms/check")
	b.ReportMetric(float64(stat.Microseconds())/1000/float64(b.N), "ms/stat")
	b.ReportMetric(check.Seconds()/stat.Seconds(), "check/stat")
}
