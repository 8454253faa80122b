package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// reloadCmd asks the daemon to reload its config and waits for the
// outcome, so that the unit's ExecReload (and `systemctl reload`) fails when
// the reload is refused, where `kill -HUP` always looked like success.
func reloadCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Reload the daemon's config and say whether it was applied (exit 2 when refused)",
		Long: `Reload the daemon's config, as SIGHUP does, and wait for the outcome. A
reload is all or nothing: an invalid file, or a new or changed plugin that
does not start with its new config, is refused (exit 2, SYS_RELOAD_REFUSED)
and the running config and plugins are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, printed, err := show(g, 10*time.Minute, (*client).Reload)
			if err != nil || printed {
				return err
			}
			fmt.Fprintln(g.stdout, "config reloaded")
			return nil
		},
	}
}
