package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/spf13/cobra"
)

func dlqCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "Inspect, retry and delete dead letters"}
	cmd.AddCommand(dlqTopicsCmd(g), dlqListCmd(g), dlqGetCmd(g), dlqRetryCmd(g), dlqReviveCmd(g), dlqDeleteCmd(g), dlqRetryAllCmd(g),
		dlqSearchCmd(g), dlqGroupsCmd(g))
	cmd.AddCommand(dlqTriageCmds(g)...)
	cmd.AddCommand(dlqBulkCmds(g)...)
	return cmd
}

func dlqTopicsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "topics",
		Short: "List DLQ topics with message counts per status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			var raw []byte
			body, err := c.Topics(ctx, adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			if len(body.Topics) == 0 {
				fmt.Fprintln(g.stdout, "no dead letters")
				return nil
			}
			defer printPauses(g, body.Topics)
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "TOPIC\tPENDING\tRETRYING\tRESOLVED\tDEAD\tOLDEST PENDING")
			for _, t := range body.Topics {
				oldest := "-"
				if t.OldestPendingAt != nil {
					oldest = *t.OldestPendingAt
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\n", t.Topic, t.Counts["PENDING"], t.Counts["RETRYING"], t.Counts["RESOLVED"], t.Counts["DEAD"], oldest)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, t := range body.Topics {
				sources := make([]string, 0, len(t.UnconfiguredSources))
				for s := range t.UnconfiguredSources {
					sources = append(sources, s)
				}
				sort.Strings(sources)
				for _, s := range sources {
					fmt.Fprintf(g.stdout, "%s: %d PENDING: source %q is not configured; they are not retried until a [[dlq_source]] of that name is (or are deleted)\n",
						t.Topic, t.UnconfiguredSources[s], s)
				}
			}
			return nil
		},
	}
}

func dlqListCmd(g *globals) *cobra.Command {
	var (
		page, pageSize int
		status         string
	)
	cmd := &cobra.Command{
		Use:   "list TOPIC",
		Short: "List a topic's dead letters, newest first (TOPIC is the DLQ topic or the original topic)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			q.Set("page", strconv.Itoa(page))
			q.Set("page_size", strconv.Itoa(pageSize))
			if status != "" {
				q.Set("status", status)
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			var raw []byte
			body, err := c.ListMessages(ctx, args[0], q, adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			// A topic nothing was stored for is most likely a typo.
			var unknown error
			if body.Note != "" {
				unknown = &exitError{code: ExitAttention, err: errors.New(body.Note), silent: g.json()}
			}
			if g.json() {
				g.printRaw(raw)
				return unknown
			}
			if unknown != nil {
				return unknown
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tRETRIES\tORIGINAL TOPIC\tCREATED\tERROR")
			for _, m := range body.Messages {
				fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", m.ID, m.Status, m.RetryCount, m.MaxRetries, m.OriginalTopic, m.CreatedAt, oneLine(m.ErrorMessage))
			}
			w.Flush()
			p := body.Pagination
			more := ""
			if p.HasNext {
				more = fmt.Sprintf("; next: --page %d", p.Page+1)
			}
			fmt.Fprintf(g.stderr, "page %d (%d per page) of %d messages%s\n", p.Page, p.PageSize, p.TotalCount, more)
			return nil
		},
	}
	cmd.Flags().IntVar(&page, "page", 1, "page number, from 1")
	cmd.Flags().IntVar(&pageSize, "page-size", 20, "messages per page (1-1000)")
	cmd.Flags().StringVar(&status, "status", "", "only "+enum.Sentence(dlq.Statuses, "or"))
	completeDLQStatus(cmd)
	return cmd
}

func parseIDArg(s string) (string, error) {
	if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
		return "", usageErrorf("%q is not a message id (a UUID)", s)
	}
	return s, nil
}

func dlqGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one dead letter with its payload and headers",
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
			var raw []byte
			m, err := c.Message(ctx, id, adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintf(w, "id\t%s\nstatus\t%s\nretries\t%d/%d\ntopic\t%s (partition %d, offset %d, source %s)\noriginal topic\t%s\nerror\t%s\ncreated\t%s\nupdated\t%s\n",
				m.ID, m.Status, m.RetryCount, m.MaxRetries, m.Topic, m.Partition, m.Offset, m.Source, orNone(m.OriginalTopic), m.ErrorMessage, m.CreatedAt, m.UpdatedAt)
			if !m.SourceConfigured {
				fmt.Fprintf(w, "source\t%s is not configured: not retried until it is\n", m.Source)
			}
			if m.LastRetryAt != nil {
				fmt.Fprintf(w, "last retry\t%s\n", *m.LastRetryAt)
			}
			if m.NextRetryAt != nil {
				fmt.Fprintf(w, "next retry\t%s\n", *m.NextRetryAt)
			}
			if m.LastError != nil {
				fmt.Fprintf(w, "last error\t%s\n", oneLine(*m.LastError))
			}
			fmt.Fprintf(w, "key\t%s\n", showBytes(m.Key, m.KeyBase64))
			for _, h := range m.Headers {
				fmt.Fprintf(w, "header\t%s: %s\n", showBytes(h.Key, h.KeyBase64), showBytes(h.Value, h.ValueBase64))
			}
			for _, a := range m.Attempts {
				line := a.At + " " + a.Outcome
				if a.Trigger != "" {
					line += " (" + string(a.Trigger) + ")"
				}
				if a.UID != nil {
					line += fmt.Sprintf(" by uid %d", *a.UID)
				}
				if a.Error != "" {
					line += ": " + a.Error
				}
				if a.Count > 1 && a.LastAt != nil {
					line += fmt.Sprintf(" (%d times, the last at %s)", a.Count, *a.LastAt)
				}
				fmt.Fprintf(w, "attempt\t%s\n", oneLine(line))
			}
			w.Flush()
			if m.Truncated {
				fmt.Fprintln(g.stdout, "payload: not kept (the message was larger than the plugin RPC limit at intake)")
				return nil
			}
			switch {
			case m.PayloadBase64.Null():
				fmt.Fprintln(g.stdout, "payload: null (a tombstone: republished as one)")
			case m.PayloadBase64.Value != nil:
				fmt.Fprintf(g.stdout, "payload (not JSON, base64):\n%s\n", *m.PayloadBase64.Value)
			default:
				var pretty any
				_ = json.Unmarshal(m.Payload, &pretty)
				b, _ := json.MarshalIndent(pretty, "", "  ")
				fmt.Fprintf(g.stdout, "payload:\n%s\n", b)
			}
			return nil
		},
	}
}

// dlqMutation runs one change of dead letters with the CLI's key and a
// timeout long enough for a broker that is slow to acknowledge; the raw
// answer is for --format json.
func dlqMutation[T any](g *globals, change func(context.Context, *client, ...adminclient.Option) (T, error)) (T, []byte, error) {
	var zero T
	c, err := g.client()
	if err != nil {
		return zero, nil, err
	}
	ctx, cancel := withTimeout(10 * time.Minute)
	defer cancel()
	var raw []byte
	body, err := change(ctx, c, once(), adminclient.Raw(&raw))
	return body, raw, err
}

func dlqRetryCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID",
		Short: "Republish one dead letter to its original topic now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			body, raw, err := dlqMutation(g, func(ctx context.Context, c *client, opts ...adminclient.Option) (wire.MessageChange, error) {
				return c.RetryMessage(ctx, id, opts...)
			})
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			fmt.Fprintf(g.stdout, "%s: %v (%v)\n", id, body.Status, body.Message)
			return nil
		},
	}
}

// showBytes prints a text/base64 pair of the message JSON on one line.
func showBytes(text *string, b64 wire.Base64Field) string {
	switch {
	case text != nil:
		return oneLine(*text)
	case b64.Value != nil:
		return "(not UTF-8, base64) " + *b64.Value
	case b64.Null():
		return "(null)"
	default:
		return ""
	}
}

func dlqReviveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revive ID",
		Short: "Give a DEAD dead letter another chance: back to PENDING with its attempts reset",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			body, raw, err := dlqMutation(g, func(ctx context.Context, c *client, opts ...adminclient.Option) (wire.MessageChange, error) {
				return c.ReviveMessage(ctx, id, opts...)
			})
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			fmt.Fprintf(g.stdout, "%s: %v (%v)\n", id, body.Status, body.Message)
			return nil
		},
	}
}

func dlqDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete one dead letter",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			body, raw, err := dlqMutation(g, func(ctx context.Context, c *client, opts ...adminclient.Option) (wire.Deleted, error) {
				return c.DeleteMessage(ctx, id, opts...)
			})
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			fmt.Fprintln(g.stdout, body.Message)
			return nil
		},
	}
}

func dlqRetryAllCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "retry-all TOPIC",
		Short: "Republish every retryable dead letter of a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, raw, err := dlqMutation(g, func(ctx context.Context, c *client, opts ...adminclient.Option) (wire.RetryAllResult, error) {
				return c.RetryAll(ctx, args[0], dryRun, opts...)
			})
			if err != nil {
				return err
			}
			f, u, n := body.Failed, body.Unavailable, body.NotRecorded
			if g.json() {
				g.printRaw(raw)
				if f+u+n > 0 {
					return &exitError{code: ExitAttention, silent: true}
				}
				return nil
			}
			fmt.Fprintln(g.stdout, body.Message)
			if f > 0 {
				fmt.Fprintf(g.stderr, "%v refused by the broker (counted as failed attempts)\n", f)
			}
			if u > 0 {
				fmt.Fprintf(g.stderr, "%v not attempted: source unavailable (still PENDING)\n", u)
			}
			if n > 0 {
				fmt.Fprintf(g.stderr, "%v acknowledged by the broker after their claim ran out: not marked RESOLVED\n", n)
			}
			if f+u+n > 0 {
				return &exitError{code: ExitAttention, err: fmt.Errorf("%v of the messages were not republished or not recorded", f+u+n)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count the messages that would be republished, and change nothing")
	return cmd
}

// orNone shows an empty original topic (none is known) as such.
func orNone(topic string) string {
	if topic == "" {
		return "(none: never republished)"
	}
	return topic
}
