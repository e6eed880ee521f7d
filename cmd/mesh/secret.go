package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

// RotateCmd moves a provider's minted credentials for a consumer to a new
// generation, both ends together (rule 7).
type RotateCmd struct {
	Provider string        `arg:"" predictor:"module" help:"The module that provisions the credential (postgres)."`
	Consumer string        `required:"" predictor:"module" help:"The module whose credential moves (app)."`
	Wait     time.Duration `help:"Wait this long for every end to report applying it, and then, with an overlap, for every provider end to apply the declaration without the old credential."`
	Overlap  time.Duration `default:"24h" help:"Accept the old credential beside the new one at the provider until every consumer end applied the new, or this long at most (0: drop it at once)."`
	JSON     bool          `help:"Print {provider, consumer, generation, seq, sent, overlap_until} as JSON (before a --wait, whose outcome is the exit code)."`
}

func (c *RotateCmd) Help() string {
	return "Every node holding either end is composed at the new generation; if any cannot be, nothing is sent. The provider accepts the old credential too until every consumer end applied the new one (or --overlap passed); then the controller sends the provider its declaration without it, by itself.\n\nExamples:\n  mesh rotate postgres --consumer app --wait 30s\n  mesh rotate postgres --consumer app --overlap 2h"
}

func (c *RotateCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var r wire.RotateReply
	// A negative overlap goes as it is: the controller refuses it, with
	// its kind, so the sentence and the exit code are the decision's.
	req := wire.RotateRequest{CommandID: wire.NewCommandID(), Provider: c.Provider, Consumer: c.Consumer, Overlap: c.Overlap, NoOverlap: c.Overlap == 0}
	if err := cl.Call(ctx, wire.SubjectRotate, req, &r); err != nil {
		return err
	}
	// With --json the answer is the one object on stdout: what the wait
	// says of each end goes nowhere, its outcome is the exit code and an
	// end that did not apply is named on stderr.
	say := out.Out
	if c.JSON {
		r.Sent = cmdline.NonNil(r.Sent)
		if err := text.JSON(out.Out, r); err != nil {
			return err
		}
		say = io.Discard
	} else {
		var ends []string
		for _, s := range r.Sent {
			ends = append(ends, fmt.Sprintf("%s (sequence %d)", s.Node, s.Sequence))
		}
		fmt.Fprintf(out.Out, "rotated the credentials %s mints for %s to generation %d (event %d), sent together to %s\n",
			r.Provider, r.Consumer, r.Generation, r.Seq, strings.Join(ends, ", "))
	}
	if !c.JSON && !r.OverlapUntil.IsZero() {
		fmt.Fprintf(out.Out, "%s accepts the old credential too until every consumer end applied the new, or until %s at most; then the controller drops it by itself (mesh status says the stage)\n",
			r.Provider, text.Time(r.OverlapUntil))
	}
	if c.Wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(c.Wait)
	st, err := store.Attach(ctx, cl.NC, "")
	if err != nil {
		return err
	}
	// Every end is waited for at once: the wait is for the slowest, and
	// each end that failed or refused is named, not only the first.
	errs := make([]error, len(r.Sent))
	done := make(chan int)
	for i, s := range r.Sent {
		go func() {
			errs[i] = client.WaitReport(ctx, st, cl, s.Node, s.Digest, s.StreamSeq, c.Wait)
			done <- i
		}()
	}
	for range r.Sent {
		if i := <-done; errs[i] == nil {
			fmt.Fprintf(say, "%s applied sequence %d\n", r.Sent[i].Node, r.Sent[i].Sequence)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the rotation is sent and recorded, but not applied at every end: %w", err)
	}
	fmt.Fprintf(say, "both ends apply generation %d\n", r.Generation)
	if r.OverlapUntil.IsZero() {
		return nil
	}
	return waitDropped(ctx, st, cl, r, time.Until(deadline), say)
}

// waitDropped follows the provider's events from the rotation's on until
// the controller records the end of its overlap (every end applied, so it
// comes at the controller's next drive), then waits for each provider end
// to apply the declaration without the old credential that came in the
// same batch: rotate --wait then means the old credential is gone too.
func waitDropped(ctx context.Context, st *store.Store, cl *client.Client, r wire.RotateReply, wait time.Duration, say io.Writer) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var done events.RotationCompleted
	var at uint64
	found := errors.New("found")
	err := st.Read(wctx, store.ReadOptions{From: r.Seq + 1, Follow: true, Filter: events.ModuleAggregate(r.Provider).Filter()}, func(m store.Msg) error {
		_, ev, err := events.DecodeFromSubject(m.Subject, m.Data)
		if c, ok := ev.(events.RotationCompleted); err == nil && ok && c.Consumer == r.Consumer && c.Generation == r.Generation {
			done, at = c, m.Seq
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		return fmt.Errorf("both ends apply generation %d, but the controller has not recorded dropping the old credential within the wait (mesh status says the stage): %w", r.Generation, cmp.Or(err, context.DeadlineExceeded))
	}
	// The completion's batch: the event, then each provider end's
	// declaration, in the order of ProviderEnds.
	var sent []events.DeclarationSent
	if err := st.Read(wctx, store.ReadOptions{From: at + 1, Until: at + uint64(len(done.ProviderEnds))}, func(m store.Msg) error {
		_, ev, err := events.DecodeFromSubject(m.Subject, m.Data)
		if d, ok := ev.(events.DeclarationSent); err == nil && ok {
			sent = append(sent, d)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(say, "the controller dropped the old credential (%s, event %d)\n", done.Reason, at)
	for i, d := range sent {
		if err := client.WaitReport(ctx, st, cl, d.Node, d.Digest, at+uint64(i)+1, time.Until(deadlineOf(wctx))); err != nil {
			return fmt.Errorf("the old credential is dropped and recorded, but not applied at every provider end: %w", err)
		}
		fmt.Fprintf(say, "%s applied sequence %d, without the old credential\n", d.Node, d.Sequence)
	}
	return nil
}

// deadlineOf is ctx's deadline (now when it has none).
func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now()
	}
	return d
}

// SecretCmd acts on secret settings.
type SecretCmd struct {
	Forget SecretForgetCmd `cmd:"" help:"Forget a secret setting's values for good: no one can read them from the log or a backup taken after."`
}

type SecretForgetCmd struct {
	Node    string `arg:"" predictor:"node"`
	Module  string `arg:"" predictor:"module"`
	Setting string `arg:""`
	Version int    `name:"only-version" help:"Forget only this version (node show names the current one); without it, every version ever recorded."`
	JSON    bool   `help:"Print {forgotten, already, current, seq} as JSON (forgotten empty when there was nothing to do)."`
}

func (c *SecretForgetCmd) Help() string {
	return "Backups taken before keep the salt and can still open the value: destroy them too.\n\nExamples:\n  mesh secret forget db-1 postgres password\n  echo NEW | mesh assign db-1 postgres --set-file password=-"
}

func (c *SecretForgetCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Version < 0 {
		return cmdline.Usagef("--only-version %d is not a version: give one of those node show names, or leave it out for all", c.Version)
	}
	var f wire.Forgotten
	req := wire.ForgetRequest{CommandID: wire.NewCommandID(), Node: c.Node, Module: c.Module, Setting: c.Setting, Version: c.Version}
	if err := g.Call(ctx, wire.SubjectSecretForget, req, &f); err != nil {
		return err
	}
	if c.JSON {
		f.Forgotten, f.Already = cmdline.NonNil(f.Forgotten), cmdline.NonNil(f.Already)
		return text.JSON(out.Out, f)
	}
	what := fmt.Sprintf("secret %s of %s on %s", c.Setting, c.Module, c.Node)
	if len(f.Forgotten) > 0 {
		fmt.Fprintf(out.Out, "forgot version(s) %v of %s (recorded at event %d): no one can open them from the log or a backup taken from now on\n", f.Forgotten, what, f.Seq)
	}
	if len(f.Already) > 0 {
		fmt.Fprintf(out.Out, "version(s) %v of %s were forgotten already, nothing to do\n", f.Already, what)
	}
	if f.Current {
		fmt.Fprintf(out.Out, "its current value is forgotten: %s cannot be composed until it is set again (mesh assign %s %s --set-file %s=FILE)\n",
			c.Node, c.Node, c.Module, c.Setting)
	}
	return nil
}
