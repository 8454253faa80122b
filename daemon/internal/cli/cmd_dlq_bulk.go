package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// dlq bulk, dlq operations and dlq operation: the CLI side of
// POST/GET /api/v1/dlq/operations. The server checks every filter.

func dlqBulkCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{dlqBulkCmd(g), dlqOperationsCmd(g), dlqOperationCmd(g)}
}

func dlqBulkCmd(g *globals) *cobra.Command {
	var (
		topic, errText, group, errorGroup, key, text, since, until, target string
		statuses, headers, ids                                             []string
		rate                                                               float64
		dryRun, wait                                                       bool
		timeout                                                            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bulk ACTION",
		Short: "Retry, revive, delete, mark dead or replay every dead letter a filter (or an id list) matches",
		Long: "Start a bulk operation: ACTION is " + enum.Sentence(dlq.OperationActions, "or") + " (replay_to with --target-topic).\n" +
			"The set is fixed when it starts: messages arriving later are not swept in. The operation is\n" +
			"stored and survives a restart; `dlq operation ID` shows it and `dlq operation cancel ID` stops it.\n" +
			"--dry-run shows how many messages would be acted on, with a sample, and changes nothing.\n" +
			"With --wait, exit status 3 when the operation ends CANCELLED or FAILED or some messages failed.",
		Example: `  lifecycled dlq bulk retry --group 9b0397dcab186145 --rate 500 --wait
  lifecycled dlq bulk retry --error-group 5d1c0e7f9a2b4c68 --status PENDING --rate 200 --wait
  lifecycled dlq bulk delete --topic orders.dlq.v1 --status DEAD --error "schema" --dry-run
  lifecycled dlq bulk replay_to --target-topic orders.replay.v1 --id 0190... --id 0190...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := wire.OperationRequest{Action: args[0]}
			filter := map[string]any{}
			var notJSON []string
			set := func(name, v string) {
				if cmd.Flags().Changed(name) {
					filter[name] = v
					if !utf8.ValidString(v) {
						notJSON = append(notJSON, "--"+name)
					}
				}
			}
			now := time.Now()
			set("topic", topic)
			set("error", errText)
			set("group", group)
			if cmd.Flags().Changed("error-group") {
				filter["error_group"] = errorGroup
			}
			set("key", key)
			set("q", text)
			if err := timeFlags(cmd, now, since, until, func(name, at string) { filter[name] = at }); err != nil {
				return err
			}
			if len(statuses) > 0 {
				filter["status"] = splitList(statuses)
			}
			if len(headers) > 0 {
				filter["header"] = headers
				for _, h := range headers {
					if !utf8.ValidString(h) {
						notJSON = append(notJSON, "--header")
					}
				}
			}
			if len(notJSON) > 0 {
				// JSON would carry such text as U+FFFD in place of each bad
				// byte: the operation would act on other messages than
				// `dlq search` with the same text finds.
				return usageErrorf("%s: not valid UTF-8; a bulk operation's filter is JSON, which cannot carry these bytes (dlq search can)",
					strings.Join(notJSON, ", "))
			}
			switch {
			case len(ids) > 0 && len(filter) > 0:
				return usageErrorf("give filters or --id, not both")
			case len(ids) > 0:
				body.IDs = ids
			case len(filter) == 0:
				return usageErrorf("give at least one filter (--topic, --status, --error, --group, --error-group, --key, --header, --q, --since, --until) or --id")
			default:
				// The filter as typed: unknown or malformed fields are the
				// server's to refuse, with the same words as a search.
				b, err := json.Marshal(filter)
				if err != nil {
					return err
				}
				body.Filter = b
			}
			if cmd.Flags().Changed("rate") {
				if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
					return usageErrorf("--rate %v: messages per second, a number above 0", rate)
				}
				body.Rate = &rate
			}
			if cmd.Flags().Changed("status") && len(splitList(statuses)) == 0 {
				return usageErrorf("--status: name the statuses, or leave it out for every one")
			}
			if target != "" {
				body.TargetTopic = &target
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(2 * time.Minute)
			defer cancel()
			var raw []byte
			if dryRun {
				preview, err := c.PreviewOperation(ctx, body, once(), adminclient.Raw(&raw))
				if err != nil {
					return err
				}
				return printDryRun(g, raw, preview, args[0])
			}
			op, err := c.StartOperation(ctx, body, once(), adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if !wait {
				if g.json() {
					g.printRaw(raw)
					return nil
				}
				fmt.Fprintf(g.stdout, "operation %s started: %s of %d messages (follow it with `lifecycled dlq operation %s --wait`)\n",
					op.ID, op.Action, op.Matched, op.ID)
				return nil
			}
			return waitForOperation(g, c, op.ID, timeout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "DLQ topic or original topic")
	f.StringSliceVar(&statuses, "status", nil, "statuses ("+strings.Join(enum.Strings(dlq.Statuses), ", ")+"), comma-separated or repeated")
	f.StringVar(&errText, "error", "", "text in the error, case ignored")
	f.StringVar(&group, "group", "", "failure group id (see: lifecycled dlq groups)")
	f.StringVar(&errorGroup, "error-group", "", "error group id: its failure groups in every source (see: lifecycled dlq groups --by error)")
	f.StringVar(&key, "key", "", "the exact message key")
	f.StringArrayVar(&headers, "header", nil, "header name or name=value (repeatable)")
	f.StringVar(&text, "q", "", "text in the payload, case ignored")
	f.StringVar(&since, "since", "", "created at or after: RFC 3339, or a duration ago (2h)")
	f.StringVar(&until, "until", "", "created before: RFC 3339, or a duration ago")
	f.StringArrayVar(&ids, "id", nil, "act on this message id instead of a filter (repeatable)")
	f.Float64Var(&rate, "rate", 0, "messages per second (default: as fast as it goes)")
	f.StringVar(&target, "target-topic", "", "replay_to: the topic to replay to")
	f.BoolVar(&dryRun, "dry-run", false, "show how many messages would be acted on, with a sample; change nothing")
	f.BoolVar(&wait, "wait", false, "wait for the end, showing progress")
	f.DurationVar(&timeout, "timeout", 0, "with --wait, stop waiting after this long (the operation goes on)")
	cmd.ValidArgsFunction = completeValues(enum.Strings(dlq.OperationActions))
	completeDLQStatus(cmd)
	return cmd
}

// splitList accepts both "A,B" and repeated flags.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func printDryRun(g *globals, raw []byte, d wire.OperationDryRun, action string) error {
	if g.json() {
		g.printRaw(raw)
		return nil
	}
	fmt.Fprintf(g.stdout, "dry run: %s would act on %d messages; nothing was changed\n", action, d.Matched)
	if len(d.Sample) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTOPIC\tSTATUS\tERROR")
	for _, m := range d.Sample {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, m.DLQTopic, m.Status, oneLine(m.ErrorMessage))
	}
	return w.Flush()
}

func dlqOperationsCmd(g *globals) *cobra.Command {
	var running bool
	cmd := &cobra.Command{
		Use:   "operations",
		Short: "List bulk operations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var q url.Values
			if running {
				q = url.Values{"state": {"RUNNING"}}
			}
			body, printed, err := show(g, 30*time.Second, query(q, (*client).Operations))
			if err != nil || printed {
				return err
			}
			if len(body.Operations) == 0 {
				fmt.Fprintln(g.stdout, "no bulk operations")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tACTION\tSTATE\tDONE\tSUCCEEDED\tFAILED\tCREATED")
			for _, op := range body.Operations {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", op.ID, op.Action, op.State, op.Done, op.Matched, op.Succeeded, op.Failed, op.CreatedAt)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&running, "running", false, "only RUNNING operations")
	return cmd
}

func dlqOperationCmd(g *globals) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "operation ID",
		Short: "Show a bulk operation (--wait: follow it to its end); `operation cancel ID` stops it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, c, err := idClient(g, args[0])
			if err != nil {
				return err
			}
			if wait {
				return waitForOperation(g, c, id, timeout)
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			var raw []byte
			op, err := c.Operation(ctx, id, adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			printOperation(g, &op)
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the operation to its end, showing progress")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, stop waiting after this long (the operation goes on)")
	cmd.AddCommand(&cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a bulk operation between two pages; what it did stays done",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, c, err := idClient(g, args[0])
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			var raw []byte
			op, err := c.CancelOperation(ctx, id, once(), adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			if op.State == "RUNNING" {
				fmt.Fprintf(g.stdout, "cancel requested: operation %s stops after the page in flight (%d/%d done)\n", op.ID, op.Done, op.Matched)
			} else {
				fmt.Fprintf(g.stdout, "operation %s is %s (%d/%d done)\n", op.ID, op.State, op.Done, op.Matched)
			}
			return nil
		},
	})
	return cmd
}

// idClient checks the id argument and opens the admin API client: the
// start of every command about one operation.
func idClient(g *globals, arg string) (string, *client, error) {
	id, err := parseIDArg(arg)
	if err != nil {
		return "", nil, err
	}
	c, err := g.client()
	return id, c, err
}

// waitForOperation polls an operation to its end: a bar on a terminal,
// a line per change otherwise; then the summary.
func waitForOperation(g *globals, c *client, id string, timeout time.Duration) error {
	ctx, stop := interruptible()
	defer stop()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var bar *progressbar.ProgressBar
	tty := isTTY(g.stderr)
	last := ""
	for {
		var raw []byte
		reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		op, err := c.Operation(reqCtx, id, adminclient.Raw(&raw))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return &exitError{code: ExitAttention, err: fmt.Errorf("stopped waiting; operation %s goes on", id)}
			}
			return err
		}
		if tty {
			if bar == nil {
				bar = progressbar.NewOptions64(max(op.Matched, 1), progressbar.OptionSetWriter(g.stderr), progressbar.OptionShowCount(),
					progressbar.OptionShowIts(), progressbar.OptionSetItsString("msg"), progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			_ = bar.Set64(min(op.Done, bar.GetMax64()))
			bar.Describe(fmt.Sprintf("%s %s, %d failed", op.Action, op.State, op.Failed))
		} else if line := progressLine(&op); line != last {
			fmt.Fprintln(g.stderr, line)
			last = line
		}
		if op.State != "RUNNING" {
			if bar != nil {
				_ = bar.Finish()
			}
			if g.json() {
				g.printRaw(raw)
			} else {
				printOperation(g, &op)
			}
			if op.State != "COMPLETED" || op.Failed > 0 {
				return &exitError{code: ExitAttention, silent: true, err: errors.New("operation " + op.State)}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return &exitError{code: ExitAttention, err: fmt.Errorf("stopped waiting; operation %s goes on (%d/%d done)", id, op.Done, op.Matched)}
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func progressLine(op *wire.Operation) string {
	line := fmt.Sprintf("%s %s %d/%d done, %d succeeded, %d failed", op.Action, op.State, op.Done, op.Matched, op.Succeeded, op.Failed)
	if op.ETASeconds != nil {
		line += fmt.Sprintf(", about %s left", (time.Duration(*op.ETASeconds) * time.Second).Round(time.Second))
	}
	return line
}

func printOperation(g *globals, op *wire.Operation) {
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "operation\t%s\n", op.ID)
	fmt.Fprintf(w, "action\t%s\n", op.Action)
	if op.TargetTopic != "" {
		fmt.Fprintf(w, "target topic\t%s\n", op.TargetTopic)
	}
	fmt.Fprintf(w, "state\t%s\n", op.State)
	fmt.Fprintf(w, "filter\t%s\n", string(op.Filter))
	fmt.Fprintf(w, "done\t%d/%d (%d succeeded, %d failed)\n", op.Done, op.Matched, op.Succeeded, op.Failed)
	if len(op.Outcomes) > 0 {
		names := make([]string, 0, len(op.Outcomes))
		for n := range op.Outcomes {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, op.Outcomes[n])
		}
		fmt.Fprintf(w, "outcomes\t%s\n", strings.Join(parts, ", "))
	}
	if op.Rate > 0 {
		fmt.Fprintf(w, "rate\t%g/s\n", op.Rate)
	}
	if op.ETASeconds != nil {
		fmt.Fprintf(w, "time left\tabout %s\n", (time.Duration(*op.ETASeconds) * time.Second).Round(time.Second))
	}
	fmt.Fprintf(w, "created\t%s\n", op.CreatedAt)
	if op.FinishedAt != nil {
		fmt.Fprintf(w, "finished\t%s\n", *op.FinishedAt)
	}
	if op.CancelRequestedAt != nil {
		fmt.Fprintf(w, "cancel requested\t%s\n", *op.CancelRequestedAt)
	}
	if op.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", oneLine(op.LastError))
	}
	for _, f := range op.Failures {
		fmt.Fprintf(w, "failed\t%s %s: %s\n", f.ID, f.Outcome, oneLine(f.Error))
	}
	_ = w.Flush()
}
