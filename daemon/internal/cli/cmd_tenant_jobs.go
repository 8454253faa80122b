package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func tenantJobsCmd(g *globals) *cobra.Command {
	var (
		statuses []string
		since    string
		limit    int
		cursor   string
		all      bool
	)
	cmd := &cobra.Command{
		Use:   "jobs [TENANT]",
		Short: "List deletion jobs, newest first: every tenant's, or every job of one tenant",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if len(statuses) > 0 {
				q.Set("status", strings.Join(statuses, ","))
			}
			if since != "" {
				at := since
				if d, err := time.ParseDuration(since); err == nil {
					at = time.Now().Add(-d).UTC().Format(time.RFC3339)
				}
				q.Set("created_after", at)
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			// Every tenant's jobs, or one tenant's with its resurrections.
			list := func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.TenantJobs, error) {
				if len(args) == 1 {
					return c.TenantDeletions(ctx, args[0], q, opts...)
				}
				page, err := c.Deletions(ctx, q, opts...)
				return wire.TenantJobs{JobPage: page}, err
			}
			var (
				out  wire.JobPage
				back []wire.Resurrection // the tenant's, from its first page
			)
			for {
				page, raw, err := within(c, time.Minute, list)
				if err != nil {
					return err
				}
				if !all && g.json() {
					g.printRaw(raw)
					return nil
				}
				if back == nil {
					back = page.Resurrections
				}
				out.Jobs = append(out.Jobs, page.Jobs...)
				out.NextCursor = page.NextCursor
				if !all || page.NextCursor == nil {
					break
				}
				q.Set("cursor", *page.NextCursor)
			}
			if g.json() {
				return g.printValue(out)
			}
			printJobList(g, out)
			printResurrections(g, back)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only jobs in these statuses ("+strings.Join(enum.Strings(deletion.JobStatuses), ", ")+")")
	cmd.Flags().StringVar(&since, "since", "", "only jobs created since this RFC 3339 time, or this long ago (e.g. 24h)")
	cmd.Flags().IntVar(&limit, "limit", 0, "jobs per page (default 50, at most 1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor (the next_cursor of the page before)")
	cmd.Flags().BoolVar(&all, "all", false, "fetch every page")
	completeJobStatus(cmd)
	return cmd
}

func tenantCancelCmd(g *globals) *cobra.Command {
	var (
		noWait  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cancel TENANT",
		Short: "Cancel the tenant's scheduled, pending, partial or running deletion job",
		Long: `Cancel the tenant's unfinished deletion job. A job no daemon runs is CANCELLED at
once; a RUNNING one stops at the next batch boundary of each deleter, and its
report keeps what was deleted until then. A cancelled job never runs again
(a new request starts a new job). Cancelling a finished job is an error.

Waits until the job is CANCELLED, unless --no-wait.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			job, raw, err := within(c, time.Minute, bind(args[0], (*client).CancelDeletion))
			if err != nil {
				return err
			}
			if job.Status != deletion.JobCancelled && !noWait {
				if job, err = waitStopped(g, c, job.TenantID, timeout); err != nil {
					return err
				}
				raw, _ = json.Marshal(job)
			}
			if g.json() {
				g.printRaw(raw)
			} else {
				printJob(g, &job)
			}
			switch job.Status {
			case deletion.JobCancelled:
				return nil
			case deletion.JobCompleted:
				return &exitError{code: ExitAttention, silent: g.json(), err: errors.New("the job completed before its deleters could be stopped")}
			default:
				if !g.json() {
					fmt.Fprintf(g.stderr, "cancel requested; the deleters stop at their next batch: lifecycled tenant status %s\n", job.TenantID)
				}
				return nil
			}
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for a running job's deleters to stop")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting after this long (the job still stops)")
	return cmd
}

// waitStopped polls the tenant's latest job until it is finished.
func waitStopped(g *globals, c *client, tenant string, timeout time.Duration) (wire.Job, error) {
	ctx, stop := interruptible()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		job, err := c.Deletion(rctx, tenant)
		rcancel()
		if err != nil && ctx.Err() == nil {
			return job, err
		}
		if err == nil && job.Status.Finished() {
			return job, nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(g.stderr, "stopped waiting; the job stops anyway: lifecycled tenant status %s\n", tenant)
			return job, &exitError{code: ExitLocal, err: errors.New("stopped waiting"), silent: true}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// printResurrections lists a tenant's resurrections under its jobs: data
// re-verification found again after an erasure.
func printResurrections(g *globals, rs []wire.Resurrection) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(g.stdout, "\nresurrections (data found again after an erasure):")
	for _, r := range rs {
		state := "open"
		if r.ResolvedAt != nil {
			state = "resolved " + *r.ResolvedAt
		}
		reerase := ""
		if r.ReeraseJobID != nil {
			reerase = " re-erase job " + *r.ReeraseJobID
		}
		names := make([]string, 0, len(r.Counts))
		for d, n := range r.Counts {
			names = append(names, fmt.Sprintf("%s=%d", d, n))
		}
		sort.Strings(names)
		fmt.Fprintf(g.stdout, "  %s  after job %s  %s  %s%s  (%s, seen %d times)\n", r.FoundAt, r.ErasureJobID,
			strings.Join(names, " "), r.Action, reerase, state, r.SeenCount)
	}
}
