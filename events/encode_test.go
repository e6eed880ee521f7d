package events

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// Encode writes every event type's envelope exactly as encoding/json wrote
// it before the plan (the log's bytes, digests and MACs are of them), for
// values that take the plan and values that must step aside to Marshal:
// escapes, HTML characters, UTF-8 and bytes that are not, times at an
// offset or out of Marshal's years, empty and nil collections.
func TestEncodeWritesWhatMarshalWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 1))
	for typ, ent := range table {
		zero, err := ent.decode(json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		rt := reflect.TypeOf(zero)
		for i := range 300 {
			v := reflect.New(rt).Elem()
			fill(rng, v, i%3 == 0)
			ev := v.Interface().(Event)
			by := []string{"", "alice", "rollout r-1", "<x>"}[i%4]
			at := someTime(rng, i%3 == 0)
			got, err := Encode(NodeAggregate("web-1"), "cmd-1", by, i, at, ev)
			want, werr := json.Marshal(outgoing{Meta: Meta{ID: EventID("cmd-1", i), Type: typ, Version: ent.current,
				Aggregate: NodeAggregate("web-1"), OccurredAt: at.UTC(), CommandID: "cmd-1", By: by}, Data: ev})
			if (err != nil) != (werr != nil) || string(got) != string(want) {
				t.Fatalf("%s: Encode wrote\n%s (%v)\nMarshal writes\n%s (%v)", typ, got, err, want, werr)
			}
		}
	}
}

// The plan writes every type that has one, so a push's appends do not fall
// back to encoding/json unseen: a plan that stopped applying would show
// only as a slower controller.
func TestEncodeTakesThePlanForPlainValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 2))
	planned := 0
	for typ, ent := range table {
		zero, _ := ent.decode(json.RawMessage(`{}`))
		if encodePlan(reflect.TypeOf(zero)) == nil {
			continue
		}
		planned++
		v := reflect.New(reflect.TypeOf(zero)).Elem()
		fill(rng, v, false)
		m := Meta{ID: "c/0", Type: typ, Version: ent.current, Aggregate: NodeAggregate("n"), OccurredAt: time.Now().UTC(), CommandID: "c"}
		if _, ok := appendEncoded(nil, m, v.Interface().(Event)); !ok {
			t.Errorf("%s has a plan but its plain value was handed to encoding/json", typ)
		}
	}
	for _, typ := range []string{"DeclarationSent", "DeclarationApplied", "NodeEnrolled", "ModuleAssigned"} {
		zero, _ := table[typ].decode(json.RawMessage(`{}`))
		if encodePlan(reflect.TypeOf(zero)) == nil {
			t.Errorf("%s, written by the thousand in a push, has no plan", typ)
		}
	}
	if planned == 0 {
		t.Fatal("no event type has a plan")
	}
}

// fill sets every settable field of v: plain values, or (awkward) values
// that Marshal escapes or refuses, and sometimes nil or empty.
func fill(rng *rand.Rand, v reflect.Value, awkward bool) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(someTime(rng, awkward)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), awkward)
			}
		}
	case reflect.String:
		v.SetString(someString(rng, awkward))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, -1, 7, 1 << 40, -(1 << 62)}[rng.IntN(5)] >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint([]uint64{0, 1, 1<<64 - 1, 12345}[rng.IntN(4)] >> (64 - v.Type().Bits()))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Slice:
		n := rng.IntN(4) - 1 // -1: nil
		if n < 0 {
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 && v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"a":1}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), awkward)
		}
		v.Set(s)
	case reflect.Map:
		n := rng.IntN(4) - 1
		if n < 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(rng, k, awkward)
			fill(rng, e, awkward)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			p := reflect.New(v.Type().Elem())
			fill(rng, p.Elem(), awkward)
			v.Set(p)
		}
	}
}

func someString(rng *rand.Rand, awkward bool) string {
	plain := []string{"", "web-1", "sha256:ab12", "push", "a b/c.d_e:f~{}[]"}
	if !awkward {
		return plain[rng.IntN(len(plain))]
	}
	odd := []string{"<b>&", `q"uote`, `back\slash`, "tab\there", "zoné", "\u2028", "\xff\xfe", "del\x7f"}
	return plain[rng.IntN(len(plain))] + odd[rng.IntN(len(odd))]
}

func someTime(rng *rand.Rand, awkward bool) time.Time {
	t := time.Date(2026, 12, 5, 6, 7, 8, rng.IntN(1e9), time.UTC)
	if !awkward {
		return t
	}
	return []time.Time{{}, t.In(time.FixedZone("x", 3600)), t.AddDate(8000, 0, 0), t.Truncate(time.Second)}[rng.IntN(4)]
}

// encodeShapes has every kind a plan writes under each way Marshal leaves a
// field out, which the table's types do not all use.
type encodeShapes struct {
	S  string            `json:"s,omitempty"`
	SZ string            `json:"sz,omitzero"`
	I  int               `json:"i,omitempty"`
	U  uint32            `json:"u,omitzero"`
	B  bool              `json:"b,omitempty"`
	T  time.Time         `json:"t,omitempty"`
	TZ time.Time         `json:"tz,omitzero"`
	L  []string          `json:"l,omitempty"`
	LZ []string          `json:"lz,omitzero"`
	M  map[string]string `json:"m,omitempty"`
	MZ map[string]string `json:"mz,omitzero"`
	Y  []byte            `json:"y,omitempty"`
	YZ []byte            `json:"yz,omitzero"`
	P  Policy            `json:"p"`
}

func (encodeShapes) EventType() string { return "encodeShapes" }

func TestEncodeLeavesOutWhatMarshalLeavesOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 3))
	if encodePlan(reflect.TypeFor[encodeShapes]()) == nil {
		t.Fatal("the shapes have no plan")
	}
	for i := range 2000 {
		var v encodeShapes
		fill(rng, reflect.ValueOf(&v).Elem(), i%2 == 0)
		switch i % 5 {
		case 0:
			v.T, v.TZ = time.Time{}, time.Time{}
		case 1:
			// A zero instant in a location: zero to its IsZero, which
			// Marshal asks, not to reflection.
			v.TZ = time.Time{}.In(time.FixedZone("", 0))
		}
		m := Meta{ID: "c/0", Type: "encodeShapes", Version: 1, Aggregate: NodeAggregate("n"), OccurredAt: someTime(rng, false), CommandID: "c"}
		got, ok := appendEncoded(nil, m, v)
		want, err := json.Marshal(outgoing{Meta: m, Data: v})
		if ok && (err != nil || string(got) != string(want)) {
			t.Fatalf("the plan wrote\n%s\nMarshal writes\n%s (%v)", got, want, err)
		}
	}
}
