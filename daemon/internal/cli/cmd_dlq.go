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
			body, printed, err := show(g, 30*time.Second, (*client).Topics)
			if err != nil || printed {
				return err
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
			q := url.Values{}
			q.Set("page", strconv.Itoa(page))
			q.Set("page_size", strconv.Itoa(pageSize))
			if status != "" {
				q.Set("status", status)
			}
			body, printed, err := show(g, 30*time.Second, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.MessageList, error) {
				return c.ListMessages(ctx, args[0], q, opts...)
			})
			if err != nil {
				return err
			}
			// A topic nothing was stored for is most likely a typo.
			if body.Note != "" {
				return &exitError{code: ExitAttention, err: errors.New(body.Note), silent: printed}
			}
			if printed {
				return nil
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
			m, printed, err := show(g, 30*time.Second, bind(id, (*client).Message))
			if err != nil || printed {
				return err
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintf(w, "id\t%s\nstatus\t%s\nretries\t%d/%d\ntopic\t%s (at %s, source %s)\noriginal topic\t%s\nerror\t%s\ncreated\t%s\nupdated\t%s\n",
				m.ID, m.Status, m.RetryCount, m.MaxRetries, m.Topic, m.Position, m.Source, orNone(m.OriginalTopic), m.ErrorMessage, m.CreatedAt, m.UpdatedAt)
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

// dlqChangeTimeout is how long a change of dead letters may take: long
// enough for a broker that is slow to acknowledge.
const dlqChangeTimeout = 10 * time.Minute

// dlqChangeCmd is a command that changes one dead letter, named by its ID,
// with the CLI's key, and prints the answer (raw for --format json).
func dlqChangeCmd[T any](g *globals, use, short string, change func(*client, context.Context, string, ...adminclient.Option) (T, error), print func(id string, body T)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseIDArg(args[0])
			if err != nil {
				return err
			}
			body, printed, err := show(g, dlqChangeTimeout, bind(id, change), once())
			if err != nil || printed {
				return err
			}
			print(id, body)
			return nil
		},
	}
}

func dlqRetryCmd(g *globals) *cobra.Command {
	return dlqChangeCmd(g, "retry ID", "Republish one dead letter to its original topic now", (*client).RetryMessage, printMessageChange(g))
}

// printMessageChange says a dead letter's new status.
func printMessageChange(g *globals) func(string, wire.MessageChange) {
	return func(id string, body wire.MessageChange) {
		fmt.Fprintf(g.stdout, "%s: %v (%v)\n", id, body.Status, body.Message)
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
	return dlqChangeCmd(g, "revive ID", "Give a DEAD dead letter another chance: back to PENDING with its attempts reset", (*client).ReviveMessage, printMessageChange(g))
}

func dlqDeleteCmd(g *globals) *cobra.Command {
	return dlqChangeCmd(g, "delete ID", "Delete one dead letter", (*client).DeleteMessage, func(_ string, body wire.Deleted) {
		fmt.Fprintln(g.stdout, body.Message)
	})
}

func dlqRetryAllCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "retry-all TOPIC",
		Short: "Republish every retryable dead letter of a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, printed, err := show(g, dlqChangeTimeout, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.RetryAllResult, error) {
				return c.RetryAll(ctx, args[0], dryRun, opts...)
			}, once())
			if err != nil {
				return err
			}
			f, u, n := body.Failed, body.Unavailable, body.NotRecorded
			if printed {
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
