package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
)

func archiveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "archive", Short: "Retention: archive finished dead letters and purge old data"}
	cmd.AddCommand(&cobra.Command{
		Use:   "run",
		Short: "Run one retention pass now and show what it moved and purged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(time.Hour)
			defer cancel()
			raw, _, err := c.do(ctx, "POST", "/api/v1/archive/run", nil, nil)
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			var body adminapi.ArchiveRunBody
			if err := json.Unmarshal(raw, &body); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "archived %d dead letters, purged %d archived rows and %d expired idempotency keys in %.2fs (longest batch %.3fs)\n",
				body.Archived, body.PurgedDLQ, body.PurgedKeys, body.TookSeconds, body.LongestBatchSeconds)
			return nil
		},
	})
	return cmd
}
