package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/spf13/cobra"
)

// dlqTriageCmds are the triage subcommands of `dlq`: replay, show (the
// message and its history), pause and resume.
func dlqTriageCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{dlqReplayCmd(g), dlqShowCmd(g), dlqPauseCmd(g), dlqResumeCmd(g)}
}

func dlqReplayCmd(g *globals) *cobra.Command {
	var (
		payloadFile, key, topic string
		keySet, dryRun          bool
		headers, dropHeaders    []string
	)
	cmd := &cobra.Command{
		Use:   "replay ID",
		Short: "Republish a dead letter, edited or not, leaving the stored one unchanged",
		Long: "Republish a dead letter through its source, with a new payload, headers, key or topic if given;\n" +
			"what is not given is taken from the stored message, which does not change. The replay is\n" +
			"recorded in the message's history with your uid. --dry-run shows what would be sent.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			var payload []byte
			if payloadFile != "" {
				if payload, err = readPayload(payloadFile); err != nil {
					return err
				}
			}
			keySet = cmd.Flags().Changed("key")
			body, err := replayBody(payload, payloadFile != "", headers, dropHeaders, key, keySet, topic)
			if err != nil {
				return err
			}
			rep, printed, err := show(g, 2*time.Minute, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.ReplayResult, error) {
				return c.Replay(ctx, id, &body, dryRun, opts...)
			}, once())
			if err != nil || printed {
				return err
			}
			changed := "nothing: sent as stored"
			if len(rep.Changed) > 0 {
				changed = strings.Join(rep.Changed, ", ")
			}
			if rep.DryRun {
				fmt.Fprintf(g.stdout, "dry run: %s would be replayed to %s (changed: %s); nothing was sent\n", id, rep.Replayed.Topic, changed)
			} else {
				fmt.Fprintf(g.stdout, "%s replayed to %s as %s (changed: %s)\n", id, rep.Replayed.Topic, rep.Replayed.ID, changed)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintf(w, "key\t%s\n", showBytes(rep.Replayed.Key, rep.Replayed.KeyBase64))
			for _, h := range rep.Replayed.Headers {
				fmt.Fprintf(w, "header\t%s: %s\n", showBytes(h.Key, h.KeyBase64), showBytes(h.Value, h.ValueBase64))
			}
			switch {
			case rep.Replayed.PayloadBase64.Null():
				fmt.Fprintf(w, "payload\tnull (a tombstone)\n")
			case rep.Replayed.PayloadBase64.Value != nil:
				fmt.Fprintf(w, "payload\t(not JSON, base64) %s\n", *rep.Replayed.PayloadBase64.Value)
			default:
				fmt.Fprintf(w, "payload\t%s\n", oneLine(string(rep.Replayed.Payload)))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&payloadFile, "payload-file", "", "send this file's bytes as the payload (- for stdin)")
	cmd.Flags().StringArrayVar(&headers, "header", nil, "set header name=value, replacing every stored header of that name (repeatable)")
	cmd.Flags().StringArrayVar(&dropHeaders, "drop-header", nil, "leave out every stored header of this name (repeatable)")
	cmd.Flags().StringVar(&key, "key", "", "send with this key (an empty one is a key)")
	cmd.Flags().StringVar(&topic, "topic", "", "send to this topic instead of the original topic")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be sent, and send nothing")
	return cmd
}

// maxPayloadFile is the largest payload a replay can carry: base64 makes
// it 4/3 as large, and the admin API takes request bodies of up to 1 MiB
// (some room is left for the rest of the body).
const maxPayloadFile = (1<<20)*3/4 - 4<<10

// readPayload reads --payload-file (- for stdin); a file too large for the
// API is refused here, never cut.
func readPayload(name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, usageErrorf("--payload-file: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPayloadFile+1))
	if err != nil {
		return nil, usageErrorf("--payload-file: %v", err)
	}
	if len(b) > maxPayloadFile {
		return nil, usageErrorf("--payload-file: more than %d bytes: too large for the admin API's 1 MiB request limit once base64-encoded", maxPayloadFile)
	}
	return b, nil
}

// replayBody is the request body of a replay from the command's flags:
// the payload's bytes as base64 (exact, JSON or not), header edits (null
// drops a header), the key when --key was given (an empty one is a key).
func replayBody(payload []byte, payloadSet bool, headers, drop []string, key string, keySet bool, topic string) (wire.ReplayRequest, error) {
	var body wire.ReplayRequest
	if payloadSet {
		b64 := base64.StdEncoding.EncodeToString(payload)
		body.PayloadBase64 = &b64
	}
	if len(headers)+len(drop) > 0 {
		edits := map[string]*string{}
		for _, h := range headers {
			k, v, ok := strings.Cut(h, "=")
			if !ok || k == "" {
				return body, usageErrorf("--header %q: want name=value", h)
			}
			edits[k] = &v
		}
		for _, k := range drop {
			if k == "" {
				return body, usageErrorf("--drop-header: want a header name")
			}
			if _, set := edits[k]; set {
				return body, usageErrorf("--drop-header %s: also set with --header", k)
			}
			edits[k] = nil
		}
		body.Headers = edits
	}
	if keySet {
		body.Key = &key
	}
	if topic != "" {
		body.Topic = &topic
	}
	return body, nil
}

func dlqShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a dead letter and its history (intake, attempts, operator actions, replays, archive)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			var hraw, mraw []byte
			h, err := c.History(ctx, id, adminclient.Raw(&hraw))
			if err != nil {
				return err
			}
			// The message may be gone (deleted, archived) while its history
			// stays: then only the history is shown.
			_, merr := c.Message(ctx, id, adminclient.Raw(&mraw))
			if g.json() {
				out := map[string]json.RawMessage{"message": json.RawMessage("null"), "history": hraw}
				if merr == nil {
					out["message"] = mraw
				}
				b, _ := json.Marshal(out)
				g.printRaw(b)
				return nil
			}
			if merr == nil {
				if err := dlqGetCmd(g).RunE(cmd, args); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(g.stdout, "id\t%s\nstatus\tno longer stored (deleted or archived): its history follows\n", id)
			}
			fmt.Fprintln(g.stdout, "history:")
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			for _, e := range h.Events {
				who := "-"
				if e.UID != nil {
					who = fmt.Sprintf("uid %d", *e.UID)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.At, e.Kind, who, eventSummary(e))
			}
			return w.Flush()
		},
	}
}

// eventSummary is one line for an event's detail: its fields as name=value,
// in name order, each cut to a length that keeps the line readable (an
// error may be 64 KiB; --format json has it whole).
func eventSummary(e wire.Event) string {
	var d map[string]any
	// Numbers as they were written: an offset above 2^53 read as a float
	// printed rounded (or as 1e+21).
	dec := json.NewDecoder(bytes.NewReader(e.Detail))
	dec.UseNumber()
	if dec.Decode(&d) != nil || len(d) == 0 {
		return ""
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := d[k]
		text, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			text = string(b)
		}
		text = strings.Join(strings.Fields(text), " ")
		if r := []rune(text); len(r) > 160 {
			text = string(r[:157]) + "..."
		}
		parts = append(parts, k+"="+text)
	}
	return strings.Join(parts, " ")
}

func dlqPauseCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause TOPIC",
		Short: "Stop the automatic retries of a DLQ topic until it is resumed (stored: survives restarts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return dlqPauseCall(g, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.PauseResult, error) {
				return c.Pause(ctx, args[0], reason, opts...)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown by lifecycled dlq topics and in the logs")
	return cmd
}

func dlqResumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resume TOPIC",
		Short: "Let the automatic retries of a paused DLQ topic run again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return dlqPauseCall(g, bind(args[0], (*client).Resume))
		},
	}
}

func dlqPauseCall(g *globals, change call[wire.PauseResult]) error {
	b, printed, err := show(g, 30*time.Second, change, once())
	if err != nil || printed {
		return err
	}
	fmt.Fprintln(g.stdout, b.Message)
	if b.Pause != nil && !b.Created {
		fmt.Fprintf(g.stdout, "paused at %s: %s\n", b.Pause.PausedAt, b.Pause.Reason)
	}
	return nil
}

// printPauses says which topics of `dlq topics` are paused, and why.
func printPauses(g *globals, topics []wire.Topic) {
	for _, t := range topics {
		if t.Paused == nil {
			continue
		}
		by := "by an operator"
		if t.Paused.Auto {
			by = "automatically"
		} else if t.Paused.UID != nil {
			by = fmt.Sprintf("by uid %d", *t.Paused.UID)
		}
		fmt.Fprintf(g.stdout, "%s: automatic retries PAUSED %s since %s: %s (resume: lifecycled dlq resume %s)\n",
			t.Topic, by, t.Paused.PausedAt, oneLine(t.Paused.Reason), shellWord(t.Topic))
	}
}

// shellWord is s as one word of a command to paste into a shell: as it is
// when it holds nothing a shell reads, else in single quotes (a queue may
// be named "Bestellungen dlq").
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/@%+,=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
