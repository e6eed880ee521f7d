package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

// EventsCmd prints the log. It reads the stream itself, not the controller:
// the log is the record, and it is readable with no controller running.
type EventsCmd struct {
	From   uint64 `help:"First stream sequence to print." default:"1"`
	Follow bool   `short:"f" help:"Keep printing new events until interrupted."`
	JSON   bool   `help:"One JSON object a line: seq, subject, type, at, data."`
}

// eventLine is the stable schema of mesh events --json.
type eventLine struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Type    string    `json:"type"`
	Version int       `json:"version"`
	At      time.Time `json:"at"`
	Command string    `json:"command_id,omitempty"`
	// By is who asked for it (issue 33): an operator, or the actor the
	// controller names when it acted by itself; absent in a report.
	By    string          `json:"by,omitempty"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error,omitempty"`
	// Foreign says why the message is not its rightful writer's event
	// (rule 19): the fold set it aside. Acknowledged once the operator has.
	Foreign      string `json:"foreign,omitempty"`
	Acknowledged bool   `json:"acknowledged,omitempty"`
}

func (c *EventsCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	s, closeBus, err := g.Log(ctx, false, "mesh events")
	if err != nil {
		return err
	}
	defer closeBus()
	foreign, ferr := foreignBySeq(ctx, g)
	if ferr != nil {
		fmt.Fprintf(out.Err, "foreign messages are marked only where they cannot be read as mesh events: %v\n", ferr)
	}
	var listed, unreadable, open int
	err = s.Read(ctx, store.ReadOptions{From: c.From, Follow: c.Follow}, func(m store.Msg) error {
		line := eventLine{Seq: m.Seq, Subject: m.Subject, At: m.Time.UTC()}
		env, derr := events.DecodeEnvelope(m.Data)
		if derr != nil {
			line.Type, line.Error = "?", derr.Error()
			line.Data, _ = json.Marshal(string(m.Data))
		} else {
			line.Type, line.Version, line.At, line.Command, line.By, line.Data = env.Type, env.Version, env.OccurredAt, env.CommandID, env.By, env.Data
		}
		// Shown, never skipped: an open one makes the command fail at the end.
		switch f, ok := foreign[m.Seq]; {
		case ok:
			line.Foreign, line.Acknowledged = f.Reason, f.Acked != 0
			if f.Acked == 0 {
				open++
			}
		case derr != nil:
			unreadable++
		}
		listed++
		if c.JSON {
			b, _ := json.Marshal(line)
			_, err := fmt.Fprintf(out.Out, "%s\n", b)
			return err
		}
		text.Showable(&line)
		line.Data = json.RawMessage(text.Shown(string(line.Data)))
		mark := ""
		if line.Foreign != "" {
			mark = "  FOREIGN: " + line.Foreign
			if line.Acknowledged {
				mark = "  FOREIGN (acknowledged): " + line.Foreign
			}
		}
		by := ""
		if line.By != "" {
			by = "  by " + line.By
		}
		_, err := fmt.Fprintf(out.Out, "%6d  %s  %-36s  %s  %s%s%s\n", line.Seq, text.Time(line.At), line.Subject, line.Type, line.Data, by, mark)
		return err
	})
	if c.Follow && errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		return err
	}
	if listed == 0 && !c.Follow {
		st, _ := s.State(ctx)
		msg := fmt.Sprintf("no events at or after sequence %d (the stream ends at %d)", c.From, st.LastSeq)
		if c.JSON {
			fmt.Fprintln(out.Err, msg)
		} else {
			fmt.Fprintln(out.Out, msg)
		}
	}
	if open > 0 {
		return fmt.Errorf("%d of %d message(s) are foreign and not acknowledged (marked FOREIGN); see mesh foreign list, and mesh foreign ack SEQ once seen", open, listed)
	}
	if unreadable > 0 {
		return fmt.Errorf("%d of %d message(s) are not mesh event envelopes (shown with type ?); something other than mesh writes to stream %s", unreadable, listed, s.Name())
	}
	return nil
}

// foreignBySeq asks the controller which messages are foreign: only it can
// tell, since it holds the keys their writers must prove themselves with.
func foreignBySeq(ctx context.Context, g *cmdline.Globals) (map[uint64]wire.ForeignMessage, error) {
	var l wire.ForeignList
	if err := g.Call(ctx, wire.SubjectForeignList, wire.Empty{}, &l); err != nil {
		return nil, err
	}
	out := make(map[uint64]wire.ForeignMessage, len(l.Foreign))
	for _, f := range l.Foreign {
		out[f.Seq] = f
	}
	return out, nil
}
