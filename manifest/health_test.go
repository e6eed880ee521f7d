package manifest

import (
	"strings"
	"testing"
)

// A check's defaults are filled in at parse, so the build says every value
// the agent uses, and the same check written two ways is one build.
func TestAHealthCheckIsFilledInAndCanonical(t *testing.T) {
	short, err := Parse([]byte(`{"module":"m","run":{"command":"srv","health":{"tcp":"127.0.0.1:8080"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h := short.Run.Health
	if h.Interval != "10s" || h.Timeout != "5s" || h.StartPeriod != "0s" || h.Failures != 3 || h.Successes != 1 {
		t.Fatalf("defaults not filled in: %+v", *h)
	}
	long, err := Parse([]byte(`{"module":"m","run":{"command":"srv","health":{"tcp":"127.0.0.1:8080","interval":"10000ms","timeout":"5s","start_period":"0s","failures":3,"successes":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if short.Build() != long.Build() {
		t.Fatalf("one check, two builds:\n%s\n%s", short.Canonical(), long.Canonical())
	}
	plain, _ := Parse([]byte(`{"module":"m","run":{"command":"srv"}}`))
	if strings.Contains(string(plain.Canonical()), "health") || plain.Build() == short.Build() {
		t.Fatalf("a run without a check encodes one, or a check is not in the build: %s", plain.Canonical())
	}
	if kind, target := h.Probe(); kind != ProbeTCP || target != "127.0.0.1:8080" {
		t.Fatalf("probe = %s %s", kind, target)
	}
}

// A bad check is refused at registration in one sentence naming the field
// and what to give instead.
func TestABadHealthCheckIsRefusedNamingTheField(t *testing.T) {
	run := func(health string) string {
		return `{"module":"m","run":{"command":"srv","health":` + health + `}}`
	}
	for health, say := range map[string]string{
		`{}`: `run: health: give exactly one probe`,
		`{"tcp":"127.0.0.1:1","http":"http://127.0.0.1:1/"}`: `give exactly one probe`,
		`{"tcp":"localhost"}`:                                `tcp "localhost" is not host:port`,
		`{"tcp":"127.0.0.1:70000"}`:                          `tcp "127.0.0.1:70000" is not host:port`,
		`{"http":"ftp://127.0.0.1/"}`:                        `http "ftp://127.0.0.1/" is not an http or https URL`,
		`{"http":"/healthz"}`:                                `http "/healthz" is not an http or https URL`,
		`{"command":[""]}`:                                   `command's first word is empty`,
		`{"command":["true"],"interval":"often"}`:            `interval "often" is not a duration`,
		`{"command":["true"],"interval":"10ms"}`:             `interval 10ms is shorter than 100ms`,
		`{"command":["true"],"timeout":"-1s"}`:               `timeout "-1s" is not a duration`,
		`{"command":["true"],"interval":"1s"}`:               `timeout 5s must be more than 0 and at most the interval (1s)`,
		`{"command":["true"],"failures":101}`:                `failures 101 must be 1 to 100`,
		`{"command":["true"],"successes":-1}`:                `successes -1 must be 1 to 100`,
		`{"command":["true"],"start_period":"soon"}`:         `start_period "soon" is not a duration`,
		`{"command":["true"],"retries":3}`:                   `unknown field "retries"`,
	} {
		_, err := Parse([]byte(run(health)))
		if err == nil || !strings.Contains(err.Error(), say) {
			t.Errorf("%s: err = %v, want it to say %q", health, err, say)
		}
	}
}
