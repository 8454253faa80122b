package cli

import (
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
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
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(10 * time.Minute)
			defer cancel()
			var raw []byte
			_, err = c.Reload(ctx, adminclient.Raw(&raw))
			if err != nil {
				return err
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			fmt.Fprintln(g.stdout, "config reloaded")
			return nil
		},
	}
}
