package cli

import (
	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// Shell completion of the values the daemon declares: the same lists its
// API checks against, so that completion never offers a value it refuses.

// completeValues completes a flag or argument from a list.
func completeValues(values []string) cobra.CompletionFunc {
	return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
}

// completeDLQStatus completes a --status flag of dead letters.
func completeDLQStatus(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("status", completeValues(enum.Strings(dlq.Statuses)))
}

// completeJobStatus completes a --status flag of deletion jobs.
func completeJobStatus(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("status", completeValues(enum.Strings(deletion.JobStatuses)))
}
