package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// layoutSamples is one event of every type in the table, plus the fold's
// view of a send, with the values that test a plan: empty and nil
// collections, UTF-8, large and negative numbers. Their strings hold
// nothing Marshal escapes, so that every plan can read them.
func layoutSamples() map[string]any {
	at := time.Date(2026, 12, 2, 14, 0, 0, 123456789, time.FixedZone("x", 3600))
	return map[string]any{
		"NodeEnrolled":          NodeEnrolled{Name: "web-1", Capabilities: []string{"linux", "zoné"}, Labels: map[string]string{"k": "a } {", "": "[]"}},
		"NodeRetired":           NodeRetired{Name: "web-1", RetiredAt: at},
		"ModuleRegistered":      ModuleRegistered{Module: "m", Build: "b", Manifest: json.RawMessage(`{"a":1}`)},
		"ModuleAssigned":        ModuleAssigned{Node: "n", Module: "m", Build: "b", Settings: map[string]string{}, Policy: PolicyAuto},
		"ModuleUnassigned":      ModuleUnassigned{Node: "n", Module: "m"},
		"DeclarationSent":       DeclarationSent{Node: "n", Sequence: 1<<64 - 1, Digest: "d", By: "push", Resources: -3, Declaration: []byte("{}"), Signature: []byte{}, Key: "K", Proof: []byte{0, 1, 255}},
		"ControllerKeyRecorded": ControllerKeyRecorded{PublicKey: "A"},
		"DeclarationApplied":    DeclarationApplied{Node: "n", Sequence: 2, Digest: "d", Changed: 0},
		"DeclarationFailed":     DeclarationFailed{Node: "n", Sequence: 2, Failed: []ResourceFailure{{Path: "/p", Reason: "r"}}},
		"DeclarationRefused":    DeclarationRefused{Node: "n", Sequence: 2, Reason: "é, b", Highest: 9},
		"ProviderFailing":       ProviderFailing{Provider: "db", Machine: "m", Consumer: "c", Word: "w"},
		"ProviderRecovered":     ProviderRecovered{Provider: "db", Machine: "m", Consumer: "c"},
		"ApplyInterrupted":      ApplyInterrupted{Node: "n", Sequence: 1<<64 - 1, Digest: "d", BeganAt: at},
		"sentForFold":           sentForFold{Node: "n", Sequence: 1<<64 - 1, Digest: "d", By: "push", Resources: -3, Declaration: []byte("{}"), Signature: []byte{}, Key: "K", Proof: []byte{0, 1, 255}},
	}
}

// written is what Encode writes as the data of a sample: the fold's view
// of a send reads a whole send.
func written(name string, sample any) []byte {
	if name == "sentForFold" {
		sample = layoutSamples()["DeclarationSent"]
	}
	data, _ := json.Marshal(sample)
	return data
}

// layoutOf is the plan the fold uses for a sample's type: plans are built
// from the type alone, so building it again gives the table's.
func layoutOf(sample any) *layout { return layoutFor(reflect.TypeOf(sample)) }

// FuzzLayout: whatever the bytes, when a layout plan reads an event's data,
// encoding/json reads the same value from them. (go test runs the seeds;
// go test -fuzz FuzzLayout ./events/ searches further.)
func FuzzLayout(f *testing.F) {
	samples := layoutSamples()
	for name, ev := range samples {
		f.Add(name, written(name, ev))
	}
	f.Add("NodeEnrolled", []byte(`{"name":"a","capabilities":["\u003c"],"labels":{"q\"":"}"}}`))
	f.Add("NodeEnrolled", []byte(`{"name":"a","capabilities":null,"labels":{"k":"1","k":"2"}}`))
	f.Add("DeclarationApplied", []byte(`{"node":"n","sequence":01,"digest":"d","changed":0}`))
	f.Add("DeclarationRefused", []byte(`{"node":"n","sequence":18446744073709551616,"digest":"d","reason":"","highest":0}`))
	// Bytes: no padding, bad padding, a newline base64 skips, empty, null.
	f.Add("sentForFold", []byte(`{"node":"n","sequence":1,"digest":"d","content_digest":"c","by":"push","resources":1,"declaration":"e30","signature":null,"key":"K"}`))
	f.Add("sentForFold", []byte(`{"node":"n","sequence":1,"digest":"d","content_digest":"c","by":"push","resources":1,"declaration":"e3==","signature":null,"key":"K"}`))
	f.Add("DeclarationSent", []byte(`{"node":"n","sequence":1,"digest":"d","content_digest":"c","by":"push","resources":1,"declaration":"e3\n0=","signature":"","key":"K"}`))
	f.Add("DeclarationSent", []byte(`{"node":"n","sequence":1,"digest":"d","content_digest":"c","by":"push","resources":1,"declaration":null,"signature":"","key":"K"}`))
	// A raw CR or LF inside the string: JSON refuses it, base64 would skip it.
	f.Add("sentForFold", []byte("{\"node\":\"n\",\"sequence\":1,\"digest\":\"d\",\"content_digest\":\"c\",\"by\":\"push\",\"resources\":1,\"declaration\":\"e3\n0=\",\"signature\":null,\"key\":\"K\"}"))
	f.Add("sentForFold", []byte("{\"node\":\"n\",\"sequence\":1,\"digest\":\"d\",\"content_digest\":\"c\",\"by\":\"push\",\"resources\":1,\"declaration\":\"e30=\",\"signature\":\"\r\",\"key\":\"K\"}"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		sample, ok := samples[name]
		if !ok {
			return
		}
		l := layoutOf(sample)
		if l == nil {
			return
		}
		typ := reflect.TypeOf(sample)
		fast := reflect.New(typ)
		if !l.decode(data, fast.Interface()) {
			return
		}
		slow := reflect.New(typ)
		if err := json.Unmarshal(data, slow.Interface()); err != nil {
			t.Fatalf("%s: the layout read %q, which encoding/json refuses: %v", name, data, err)
		}
		if diff := cmp.Diff(slow.Elem().Interface(), fast.Elem().Interface()); diff != "" {
			t.Fatalf("%s %q (-encoding/json +layout):\n%s", name, data, diff)
		}
	})
}

// Every event a busy mesh folds by the thousand is read by its plan, not
// handed to encoding/json: a plan that silently stopped applying (a new
// field of a kind it cannot read) would only show as a slower fold.
func TestLayoutReadsWhatEncodeWrites(t *testing.T) {
	for name, sample := range layoutSamples() {
		l := layoutOf(sample)
		switch name {
		case "ModuleRegistered", "DeclarationFailed":
			// A raw manifest, a list of failures: rare events, for
			// encoding/json.
			if l != nil {
				t.Errorf("%s has a plan; this test expects encoding/json to read it", name)
			}
			continue
		}
		if l == nil {
			t.Errorf("%s has no layout plan: every fold of it pays for encoding/json", name)
			continue
		}
		data := written(name, sample)
		got := reflect.New(reflect.TypeOf(sample))
		if !l.decode(data, got.Interface()) {
			t.Errorf("%s: the plan refused what Marshal wrote: %s", name, data)
			continue
		}
		if diff := cmp.Diff(sample, got.Elem().Interface()); diff != "" {
			t.Errorf("%s (-written +read):\n%s", name, diff)
		}
	}
}

// The plan steps aside for what Marshal would not write, and encoding/json
// then decides.
func TestLayoutStepsAsideForOtherShapes(t *testing.T) {
	for _, data := range []string{
		`{"name":"a", "capabilities":null,"labels":null}`,           // whitespace
		`{"capabilities":null,"name":"a","labels":null}`,            // another order
		`{"name":"a\u0041","capabilities":null,"labels":null}`,      // an escape
		`{"name":"a","capabilities":null,"labels":null,"extra":1}`,  // a field it does not know
		`{"name":"a","capabilities":["x",],"labels":null}`,          // not JSON
		`{"name":"a","capabilities":null}`,                          // a field missing
		"{\"name\":\"\xff\",\"capabilities\":null,\"labels\":null}", // not UTF-8
	} {
		var ev NodeEnrolled
		if layoutOf(NodeEnrolled{}).decode([]byte(data), &ev) {
			t.Errorf("the plan read %s", data)
		}
	}
}
