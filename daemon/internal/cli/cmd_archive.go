package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/spf13/cobra"
)

func archiveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "archive", Short: "Retention: archive finished dead letters and purge old data"}
	var dryRun bool
	run := &cobra.Command{
		Use:   "run",
		Short: "Run one retention pass now and show what it moved and purged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, printed, err := show(g, time.Hour, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.ArchiveRun, error) {
				return c.RunArchive(ctx, dryRun, opts...)
			})
			if err != nil || printed {
				return err
			}
			if body.DryRun {
				fmt.Fprintf(g.stdout, "dry run: would archive %d dead letters, purge %d archived rows and %d expired idempotency keys\n",
					body.Archived, body.PurgedArchive, body.PurgedKeys)
				return nil
			}
			fmt.Fprintf(g.stdout, "archived %d dead letters, purged %d archived rows and %d expired idempotency keys in %.2fs (longest batch %.3fs)\n",
				body.Archived, body.PurgedArchive, body.PurgedKeys, body.TookSeconds, body.LongestBatchSeconds)
			return nil
		},
	}
	run.Flags().BoolVar(&dryRun, "dry-run", false, "count what a pass would archive and purge, and change nothing")
	cmd.AddCommand(run)
	return cmd
}
