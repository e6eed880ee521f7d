package commands_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/nats-io/nats.go"
)

// logLines is a log a test reads: each record's message, and a channel
// told of each "asking again".
type logLines struct {
	mu     sync.Mutex
	msgs   []string
	asking chan struct{}
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	if strings.Contains(r.Message, "asking again") {
		select {
		case l.asking <- struct{}{}:
		default:
		}
	}
	return nil
}

func (l *logLines) count(part string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

// A bus that takes every request and answers none (a hung server, as a
// killed network leaves it): the start asks again within its wait, then
// stops with one sentence naming the wait and the remedy, not the first
// call's bare "context deadline exceeded".
func TestAStartAsksASilentBusAgainThenSaysSo(t *testing.T) {
	srv := embeddedtest.Server(t)
	cut := embeddedtest.NewCutter(t, "127.0.0.1:0", strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect(cut.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cut.Deafen()
	log := &logLines{asking: make(chan struct{}, 1)}
	_, err = commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: t.TempDir(), Log: slog.New(log), StartWait: time.Second})
	if err == nil {
		t.Fatal("a start on a bus that answers nothing served")
	}
	if !strings.Contains(err.Error(), "did not answer the controller's lookup of its stream within 1s (asked 4 time(s)") || !strings.Contains(err.Error(), "--timeout") {
		t.Fatalf("the start's failure does not say how long it asked and what to do: %v", err)
	}
	if n := log.count("asking again"); n != 3 {
		t.Fatalf("the start said it asked again %d time(s), want 3 (four tries of a quarter of its wait)", n)
	}
}

// A bus that drops away while a controller starts and comes back: the
// lookup that went unanswered is asked again, and the start serves.
func TestAStartServesOnceABusThatWentAwayComesBack(t *testing.T) {
	nc, cut := embeddedtest.ConnCut(t, embeddedtest.Server(t))
	cut.Drop()
	log := &logLines{asking: make(chan struct{}, 1)}
	go func() {
		<-log.asking
		cut.Resume()
	}()
	ctrl, err := commands.StartController(context.Background(), nc, commands.ControllerConfig{Home: t.TempDir(), Log: slog.New(log), StartWait: 4 * time.Second})
	if err != nil {
		t.Fatalf("a start whose bus came back within its wait: %v", err)
	}
	defer ctrl.Close()
	if log.count("asking again") == 0 {
		t.Fatal("the start served without having asked again: the bus was never away from it")
	}
}
