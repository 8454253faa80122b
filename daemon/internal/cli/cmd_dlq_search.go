package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/spf13/cobra"
)

// dlq search and dlq groups: the CLI side of GET /api/v1/dlq/messages and
// GET /api/v1/dlq/groups. The server checks every filter; the CLI only
// turns relative times (--since 2h) into RFC 3339.

// timeFlags passes --since and --until, when given, to set as RFC 3339.
func timeFlags(cmd *cobra.Command, now time.Time, since, until string, set func(name, value string)) error {
	for _, tf := range []struct{ name, v string }{{"since", since}, {"until", until}} {
		if !cmd.Flags().Changed(tf.name) {
			continue
		}
		at, err := clientTime(tf.name, tf.v, now)
		if err != nil {
			return err
		}
		set(tf.name, at)
	}
	return nil
}

// clientTime turns a flag's time into RFC 3339: a duration means that long
// ago, an RFC 3339 time is passed on as written; anything else is refused
// here, naming both forms (the server knows only the second).
func clientTime(flag, v string, now time.Time) (string, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return v, nil
	}
	return "", usageErrorf("--%s %q: give a duration ago (2h, 30m, 90s) or an RFC 3339 time (2026-11-26T10:00:00Z)", flag, v)
}

func dlqSearchCmd(g *globals) *cobra.Command {
	var (
		topic, errText, group, errorGroup, key, text, since, until, cursor string
		statuses, headers                                                  []string
		includeArchived, oldest, all                                       bool
		limit                                                              int
	)
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Search dead letters across topics by status, error, failure group, key, header, payload text and time",
		Example: `  lifecycled dlq search --status PENDING --error "connection refused" --since 2h
  lifecycled dlq search --group 9b0397dcab186145 --all --format json
  lifecycled dlq search --error-group 5d1c0e7f9a2b4c68 --status PENDING
  lifecycled dlq search --topic orders.events.v1 --header tenant=acme --q ORD-0042`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			now := time.Now()
			q := url.Values{}
			// Flags are named like the query parameters they set.
			set := func(name, v string) {
				if cmd.Flags().Changed(name) {
					q.Set(name, v)
				}
			}
			set("topic", topic)
			set("error", errText)
			set("group", group)
			if cmd.Flags().Changed("error-group") {
				q.Set("error_group", errorGroup)
			}
			set("key", key)
			set("q", text)
			if err := timeFlags(cmd, now, since, until, q.Set); err != nil {
				return err
			}
			if len(statuses) > 0 {
				q.Set("status", strings.Join(statuses, ","))
			}
			for _, h := range headers {
				q.Add("header", h)
			}
			if includeArchived {
				q.Set("include_archived", "true")
			}
			if oldest {
				q.Set("order", "oldest")
			}
			q.Set("limit", strconv.Itoa(limit))
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			header := false
			shown := 0
			for {
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				body, raw, err := within(c, 60*time.Second, query(q, (*client).Search))
				if err != nil {
					return err
				}
				if g.json() {
					g.printRaw(raw)
				} else {
					if !header {
						fmt.Fprintln(w, "ID\tCREATED\tSTATUS\tDLQ TOPIC\tGROUP\tERROR")
						header = true
					}
					for _, m := range body.Messages {
						archived := ""
						if m.Archived {
							archived = " (archived)"
						}
						fmt.Fprintf(w, "%s\t%s\t%s%s\t%s\t%s\t%s\n", m.ID, m.CreatedAt, m.Status, archived, m.DLQTopic, orDash(m.Group), oneLine(m.ErrorMessage))
					}
					shown += len(body.Messages)
				}
				cursor = body.NextCursor
				if !all || cursor == "" {
					if !g.json() {
						w.Flush()
						total := strconv.FormatInt(body.Total, 10)
						if body.TotalIsEstimate {
							total = "about " + total
						}
						more := ""
						if cursor != "" {
							more = "; next: --cursor " + cursor
						}
						fmt.Fprintf(g.stderr, "%d shown of %s matching%s\n", shown, total, more)
					}
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "DLQ topic or original topic")
	f.StringSliceVar(&statuses, "status", nil, strings.Join(enum.Strings(dlq.Statuses), ", ")+" (repeat or comma-separate)")
	f.StringVar(&errText, "error", "", "substring of the error text, case ignored")
	f.StringVar(&group, "group", "", "failure group id (from dlq groups)")
	f.StringVar(&errorGroup, "error-group", "", "error group id: its failure groups in every source (from dlq groups --by error)")
	f.StringVar(&key, "key", "", "exact message key")
	f.StringArrayVar(&headers, "header", nil, "header NAME or NAME=VALUE (repeatable; all must match)")
	f.StringVar(&text, "q", "", "substring of the payload, case ignored")
	f.StringVar(&since, "since", "", "created at or after: RFC 3339 time, or a duration ago (2h)")
	f.StringVar(&until, "until", "", "created before: RFC 3339 time, or a duration ago")
	f.BoolVar(&includeArchived, "include-archived", false, "search the archive too")
	f.BoolVar(&oldest, "oldest", false, "oldest first (default newest first)")
	f.IntVar(&limit, "limit", 50, "messages per page (1-1000)")
	f.StringVar(&cursor, "cursor", "", "continue from a previous page's next cursor (same filters)")
	f.BoolVar(&all, "all", false, "follow the cursor to the last page (with --format json: one JSON body per page, one per line)")
	completeDLQStatus(cmd)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dlqGroupsCmd(g *globals) *cobra.Command {
	var (
		topic, sortBy, by string
		statuses          []string
		limit             int
	)
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List failure groups: dead letters that failed the same way, with counts per status",
		Long: "List failure groups: dead letters with the same original topic, exception class and error text\n" +
			"(its variable parts left out). With --by error, error groups: the same error text in every\n" +
			"source, original topic and exception class (one outage seen through Kafka, RabbitMQ and a table).",
		Example: `  lifecycled dlq groups --status PENDING,DEAD
  lifecycled dlq groups --by error --sort recent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if topic != "" {
				q.Set("topic", topic)
			}
			if len(statuses) > 0 {
				q.Set("status", strings.Join(statuses, ","))
			}
			q.Set("sort", sortBy)
			q.Set("by", by)
			q.Set("limit", strconv.Itoa(limit))
			body, printed, err := show(g, 30*time.Second, query(q, (*client).Groups))
			if err != nil || printed {
				return err
			}
			if len(body.Groups) == 0 {
				fmt.Fprintln(g.stdout, "no failure groups")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			spans, spansOf := "ORIGINAL TOPICS", func(gr wire.Group) []string { return gr.OriginalTopics }
			if by == string(dlq.GroupByError) {
				spans, spansOf = "DLQ TOPICS", func(gr wire.Group) []string { return gr.DLQTopics }
			}
			fmt.Fprintln(w, "GROUP\tPENDING\tRETRYING\tRESOLVED\tDEAD\t"+spans+"\tLAST SEEN\tSAMPLE ERROR")
			for _, gr := range body.Groups {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", gr.ID, gr.Counts["PENDING"], gr.Counts["RETRYING"], gr.Counts["RESOLVED"],
					gr.Counts["DEAD"], orDash(strings.Join(spansOf(gr), ",")), gr.LastSeen, oneLine(gr.SampleError))
			}
			w.Flush()
			if by == string(dlq.GroupByError) {
				fmt.Fprintln(g.stderr, "see an error group's messages: lifecycled dlq search --error-group GROUP")
			} else {
				fmt.Fprintln(g.stderr, "see a group's messages: lifecycled dlq search --group GROUP")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&by, "by", string(dlq.GroupByFailure), "failure (original topic, exception class and error) or error (the error alone, across sources)")
	f.StringVar(&topic, "topic", "", "only groups with messages on this DLQ topic or original topic")
	f.StringSliceVar(&statuses, "status", nil, "count only these statuses (repeat or comma-separate)")
	f.StringVar(&sortBy, "sort", "count", "count (most messages first) or recent (last seen first)")
	f.IntVar(&limit, "limit", 50, "groups to show (1-1000)")
	completeDLQStatus(cmd)
	return cmd
}
