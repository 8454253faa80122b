package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func tenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Count, delete, schedule, cancel, retry, hold and prove the erasure of tenants' data"}
	cmd.AddCommand(tenantCountCmd(g), tenantDeleteCmd(g), tenantStatusCmd(g), tenantJobsCmd(g), tenantCancelCmd(g),
		tenantRetryCmd(g), tenantHoldCmd(g), tenantReleaseCmd(g), tenantHoldsCmd(g), tenantReceiptCmd(g), tenantPlanCmd(g), tenantApproveCmd(g))
	return cmd
}

func tenantCountCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "count TENANT",
		Short: "Show what a deletion would delete, per deleter (a dry run)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, printed, err := show(g, 5*time.Minute, bind(args[0], (*client).Counts))
			if err != nil {
				return err
			}
			// Scripts use this as the check before an erasure: a total
			// that leaves a store out must not look like an answer.
			var incomplete error
			switch {
			case !body.Complete:
				incomplete = &exitError{code: ExitAttention, silent: g.json(),
					err: fmt.Errorf("incomplete: %s could not count, so the total leaves them out", plural(len(body.Failed), "deleter"))}
			case len(body.Counts) == 0 && len(body.Failed) == 0:
				// A total of 0 from no store at all is no answer: the
				// tenant's data is wherever no deleter looks.
				incomplete = &exitError{code: ExitAttention, silent: g.json(),
					err: errors.New("no deleter is configured: nothing was counted (add [[deleter]] blocks to the config, then lifecycled reload)")}
			}
			if printed {
				return incomplete
			}
			printCounts(g, &body)
			return incomplete
		},
	}
}

func isTTY(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

func tenantDeleteCmd(g *globals) *cobra.Command {
	var (
		yes       bool
		wait      bool
		timeout   time.Duration
		from      string
		notBefore string
		planHash  string
	)
	cmd := &cobra.Command{
		Use:   "delete TENANT | --from FILE",
		Short: "Start a durable deletion job for every configured store (asks first on a terminal)",
		Long: `Start a deletion job: every configured deleter deletes the tenant's data; failed
deleters are retried with backoff until a count afterwards finds nothing left
(COMPLETED, verified). The job survives daemon restarts. A second request while
a job is active returns that job. A tenant under a legal hold is refused.

With [deletion] grace_period or --not-before the job waits SCHEDULED until
then, and can be cancelled meanwhile (lifecycled tenant cancel).

--from FILE queues the tenant ids of FILE (one a line; blank lines and lines
starting with # are skipped; - reads stdin) in one request per 10,000: if any
id is invalid, the lines are named and nothing of that request is queued.

On a terminal the command shows what will be deleted and asks for the tenant id
(with --from, the number of tenants) as confirmation, unless --yes. Without a
terminal --yes is required.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if from != "" {
				if len(args) != 0 {
					return usageErrorf("give a TENANT or --from FILE, not both")
				}
				return nil
			}
			if len(args) != 1 {
				return usageErrorf("give one TENANT, or --from FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			at, err := parseNotBeforeFlag(notBefore)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if from != "" {
				if wait {
					return usageErrorf("--wait follows one tenant; with --from, follow them with lifecycled tenant jobs")
				}
				if planHash != "" {
					return usageErrorf("--plan-hash names one tenant's plan; with --from, use POST /api/v1/deletions with plan_hash")
				}
				return bulkDelete(g, c, from, at, yes)
			}
			tenant := args[0]
			if !yes {
				if err := confirmDelete(g, c, tenant); err != nil {
					return err
				}
			}
			// No body unless something is given: the plain request.
			var body *wire.DeletionRequest
			if at != "" || planHash != "" {
				body = &wire.DeletionRequest{}
			}
			if at != "" {
				body.NotBefore = &at
			}
			if planHash != "" {
				body.PlanHash = &planHash
			}
			ctx, cancel := withTimeout(time.Minute)
			var raw []byte
			job, err := c.RequestDeletion(ctx, tenant, body, once(), adminclient.Raw(&raw))
			cancel()
			if err != nil {
				return err
			}
			if !wait {
				if g.json() {
					g.printRaw(raw)
				} else {
					what := string(job.Status)
					if job.Status == deletion.JobScheduled && job.NotBefore != nil {
						what += " until " + *job.NotBefore + " (lifecycled tenant cancel " + job.TenantID + " stops it)"
					}
					if job.Status == deletion.JobAwaitingApproval {
						what += ": another operator approves it with lifecycled tenant plan " + job.TenantID + ", then lifecycled tenant approve " + job.TenantID + " --plan-hash H"
					}
					fmt.Fprintf(g.stdout, "deletion job %s for tenant %s: %s\nfollow it with: lifecycled tenant status %s\n", job.ID, job.TenantID, what, job.TenantID)
				}
				return nil
			}
			return waitForJob(g, c, tenant, timeout)
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the job is COMPLETED, showing progress per deleter")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long (the job goes on)")
	cmd.Flags().StringVar(&from, "from", "", "queue the tenant ids of this file, one a line (- for stdin)")
	cmd.Flags().StringVar(&planHash, "plan-hash", "", "the plan hash you read with 'lifecycled tenant plan': refused if the plan changed since")
	cmd.Flags().StringVar(&notBefore, "not-before", "", "start no earlier than this RFC 3339 time, or this long from now (e.g. 72h)")
	return cmd
}

// confirmDelete shows what a deletion removes and asks for the tenant id.
func confirmDelete(g *globals, c *client, tenant string) error {
	if !isTTY(os.Stdin) {
		return usageErrorf("refusing to delete tenant %s without --yes: stdin is not a terminal to confirm on", tenant)
	}
	ctx, cancel := withTimeout(5 * time.Minute)
	body, err := c.Counts(ctx, tenant)
	cancel()
	if err != nil {
		return err
	}
	printCounts(&globals{stdout: g.stderr}, &body)
	fmt.Fprintf(g.stderr, "\nThis deletes every item above, in every store, for good.\nType the tenant id to confirm: ")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	// The id as typed, or as the daemon spells it (printed above).
	if typed := strings.TrimSpace(line); typed != tenant && typed != body.TenantID {
		return localErrorf("not confirmed; nothing was deleted")
	}
	return nil
}

// parseNotBeforeFlag turns --not-before (a time or a duration from now)
// into the RFC 3339 time the API takes; "" when not given.
func parseNotBeforeFlag(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return "", usageErrorf("--not-before %s is in the past", v)
		}
		return time.Now().Add(d).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return "", usageErrorf("--not-before takes an RFC 3339 time (2026-11-01T12:00:00Z) or a duration (72h); got %q", v)
	}
	return t.UTC().Format(time.RFC3339), nil
}

// waitForJob polls the job until COMPLETED, showing progress: a bar on a
// terminal, one line per change otherwise.
func waitForJob(g *globals, c *client, tenant string, timeout time.Duration) error {
	ctx, stop := interruptible()
	defer stop()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tty := isTTY(g.stderr)
	var bar *progressbar.ProgressBar
	lastLine := map[string]string{}
poll:
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		job, err := c.Deletion(reqCtx, tenant)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break poll
			}
			return err
		}
		var done, total int64
		for _, d := range job.Deleters {
			done += d.DeletedCount
			if d.Total != nil {
				total += *d.Total
			}
		}
		if tty {
			if bar == nil && total > 0 {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(g.stderr), progressbar.OptionShowCount(),
					progressbar.OptionSetDescription("deleting "+tenant), progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			if bar != nil {
				if total > bar.GetMax64() {
					bar.ChangeMax64(total)
				}
				_ = bar.Set64(min(done, bar.GetMax64()))
				bar.Describe(fmt.Sprintf("%s %s", job.Status, summarize(job.Deleters)))
			}
		} else {
			for _, d := range job.Deleters {
				line := fmt.Sprintf("%s %s %d", d.Name, d.Status, d.DeletedCount)
				if d.Total != nil {
					line += fmt.Sprintf("/%d", *d.Total)
				}
				if d.Error != "" {
					line += " error: " + oneLine(d.Error)
				}
				if lastLine[d.Name] != line {
					fmt.Fprintln(g.stderr, line)
					lastLine[d.Name] = line
				}
			}
		}
		if job.Status.Finished() {
			if bar != nil {
				_ = bar.Finish()
			}
			printJob(g, &job)
			if job.Status == deletion.JobCancelled {
				return &exitError{code: ExitAttention, silent: true, err: errors.New("the job was cancelled")}
			}
			return nil
		}
		if job.Status == deletion.JobBlocked {
			// Nothing will change until an operator acts: waiting on is useless.
			if bar != nil {
				_ = bar.Exit()
			}
			printJob(g, &job)
			fmt.Fprintf(g.stderr, "the job is BLOCKED: fix the cause above, then: lifecycled tenant retry %s\n", tenant)
			return &exitError{code: ExitAttention, silent: true, err: errors.New("the job is blocked")}
		}
		select {
		case <-ctx.Done():
			break poll
		case <-time.After(500 * time.Millisecond):
		}
	}
	if bar != nil {
		_ = bar.Exit()
	}
	fmt.Fprintf(g.stderr, "stopped waiting; the job goes on: lifecycled tenant status %s\n", tenant)
	return &exitError{code: ExitLocal, err: errors.New("stopped waiting"), silent: true}
}

func tenantStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status TENANT",
		Short: "Show the tenant's latest deletion job and its report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, printed, err := show(g, 30*time.Second, bind(args[0], (*client).Deletion))
			if err != nil || printed {
				return err
			}
			printJob(g, &job)
			return nil
		},
	}
}
