package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// A node's word reaches the operator escaped (issue 29): a standing that
// box's own join string publishes, rightful in every way, whose word holds
// an escape code, HTML, and a line break before a made-up verdict, is
// printed quoted by status and node show (events prints its JSON), and drawn as text on the
// page: no escape code reaches the terminal, no line of the node's making
// stands as a line of the command's, and no element of its making is on
// the page. Fails when any of them prints the word raw.
func TestANodesWordIsShownEscaped(t *testing.T) {
	t.Parallel() // long and mostly waiting: beside the others (see TestMain)
	home, listen, httpAddr := t.TempDir(), freeAddr(t), freeAddr(t)
	start(t, "ready", "--home", home, "up", "--listen", listen, "--http", httpAddr)
	mustRun(t, home, "node", "enroll", "box", "--capability", "linux")
	root := filepath.Join(t.TempDir(), "root")
	start(t, "following", "--home", t.TempDir(), "agent", "--join", joinOf(t, home, "box"), "--root", root)
	mustRun(t, home, "module", "register", "../../examples/postgres.json")
	mustRun(t, home, "module", "register", "../../examples/app.json")
	mustRun(t, home, "assign", "box", "postgres", "--set", "password=x")
	mustRun(t, home, "assign", "box", "app")
	mustRun(t, home, "push", "box", "--wait", "10s")

	// The node's own keys, as its agent made them (issue 29): the word
	// is its own, which the fold believes.
	read := func(f string) nkeys.KeyPair {
		seed, err := os.ReadFile(filepath.Join(root+".state", f))
		if err != nil {
			t.Fatal(err)
		}
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	bus, report := read(declaration.NodeSeedFile), read("report.nk")
	pub, _ := bus.PublicKey()
	nc, err := nats.Connect("nats://"+listen, nats.Nkey(pub, bus.Sign), nats.UserInfo("box", ""), nats.CustomInboxPrefix(events.NodeInbox("box")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	mac, _ := declaration.ReportMACKey(bus)
	signer, _ := declaration.NewSigner(report)
	st, err := store.AttachNode(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	word := "down\x1b[2J<b>bold</b>\nwell: all 1 node(s) current, nothing failing"
	if _, err := st.Report(context.Background(), "box", wire.NewCommandID(),
		events.ProviderFailing{Provider: "postgres", Machine: "box", Consumer: "app", Word: word}, store.Sealing{Signer: signer, MAC: mac}); err != nil {
		t.Fatal(err)
	}
	embeddedtest.Eventually(t, "status to name the standing", func() bool {
		return strings.Contains(mesh(t, home, "status").out, "postgres on box failing app")
	})
	quoted := strconv.Quote(word)
	for _, args := range [][]string{{"status"}, {"node", "show", "box"}, {"events"}} {
		r := mesh(t, home, args...)
		out := r.out + r.err
		// events prints the event's JSON, whose escaping already holds.
		if strings.Contains(out, "\x1b") || args[0] != "events" && !strings.Contains(out, quoted) {
			t.Errorf("mesh %v printed the node's word raw:\n%s", args, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "well:") {
				t.Errorf("mesh %v printed a line of the node's making: %q", args, l)
			}
		}
	}

	t.Run("the page", func(t *testing.T) {
		ctx := headless(t, browser(t))
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+httpAddr+"/")); err != nil {
			t.Fatal(err)
		}
		if err := pollPage(ctx, `document.querySelector('#standings').textContent.includes("postgres on box failing app")`); err != nil {
			t.Fatal(err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(`#standings`))
		if err != nil || !strings.Contains(text, `\u001b[2J<b>bold</b>\nwell: all 1 node(s) current`) {
			t.Fatalf("the page's standings: %q %v", text, err)
		}
		if bold, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#standings b').length`)); err != nil || bold != 0 {
			t.Fatalf("the node's HTML made %d element(s) on the page (%v)", bold, err)
		}
	})
}
