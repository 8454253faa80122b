package cli

import (
	"time"

	"github.com/spf13/cobra"
)

func tenantRetryCmd(g *globals) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "retry TENANT",
		Short: "Run the tenant's BLOCKED (or PARTIAL) deletion job again now",
		Long: `Run the tenant's deletion job again now. A job is BLOCKED when what is left
failed in a way no automatic retry can fix: a deleter's error was permanent
(an invalid config, a missing table) or the deleter is no longer configured.
Fix the cause first (correct or restore the deleter's config and reload), then
retry: the blocked deleters run again. A deleter still failing for good blocks
the job again. A PARTIAL job runs now instead of after its backoff.

With --wait, waits for the job as tenant delete --wait does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			job, raw, err := within(c, time.Minute, bind(args[0], (*client).RetryDeletion))
			if err != nil {
				return err
			}
			if wait {
				return waitForJob(g, c, job.TenantID, timeout)
			}
			if g.json() {
				g.printRaw(raw)
			} else {
				printJob(g, &job)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the job is COMPLETED, CANCELLED or BLOCKED again, with progress")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait: stop waiting after this long (the job goes on); 0 waits for ever")
	return cmd
}
