package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func statusCmd(g *globals) *cobra.Command {
	var probe bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon, its plugins and their stores, state store and queue depths (exit 3 when degraded)",
		Long: "Show the daemon, its plugins and their stores, state store and queue depths. Exit 3 when degraded:\n" +
			"the state store failing, a plugin not running, or a plugin's store down at its last probe\n" +
			"(every plugins.health_interval; --probe probes every store first).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			get := (*client).Status
			if probe {
				get = (*client).StatusProbe
			}
			st, printed, err := show(g, 15*time.Second, get)
			if err != nil {
				return err
			}
			if !printed {
				printStatus(g, &st)
			}
			if !st.Ready {
				return &exitError{code: ExitAttention, err: fmt.Errorf("degraded: %s", strings.Join(st.Degraded, "; ")), silent: g.json()}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", false, "probe every plugin's store now, rather than show the last probe's answer")
	return cmd
}

func printStatus(g *globals, st *wire.Status) {
	state := "ready"
	if !st.Ready {
		state = "DEGRADED"
	}
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "lifecycled\t%s (%s)\n", state, st.Version.Version)
	fmt.Fprintf(w, "uptime\t%s\n", (time.Duration(st.UptimeSeconds) * time.Second).String())
	store := "ok"
	if !st.StateStore.OK {
		store = "FAILING: " + st.StateStore.Error
	}
	fmt.Fprintf(w, "state store\t%s (%s)\n", store, st.StateStore.Dialect)
	if st.DLQ.Counts == nil {
		fmt.Fprintf(w, "dead letters\t%s\n", st.DLQ.Error)
	} else {
		fmt.Fprintf(w, "dead letters\tPENDING %d  RETRYING %d  RESOLVED %d  DEAD %d  in %s\n",
			st.DLQ.Counts["PENDING"], st.DLQ.Counts["RETRYING"], st.DLQ.Counts["RESOLVED"], st.DLQ.Counts["DEAD"], plural(st.DLQ.Topics, "topic"))
	}
	if st.DLQ.OldestPendingAt != nil {
		fmt.Fprintf(w, "oldest pending\t%s\n", *st.DLQ.OldestPendingAt)
	}
	w.Flush()
	if len(st.Plugins) > 0 {
		fmt.Fprintln(g.stdout)
		w = tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(w, "PLUGIN\tKIND\tSTATE\tSTORE\tRESTARTS\tLAST ERROR")
		for _, p := range st.Plugins {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", p.Name, p.Kind, p.State, storeCell(p.Store), p.Restarts, oneLine(p.LastError))
		}
		w.Flush()
	}
	for _, d := range st.Degraded {
		fmt.Fprintln(g.stderr, "degraded:", d)
	}
}

// storeCell is a plugin's store in the status table: up, DOWN since when
// (the degraded lines say why), or unknown.
func storeCell(h wire.StoreHealth) string {
	if h.State == string(pluginhost.StoreDown) && h.Since != nil {
		return "DOWN since " + *h.Since
	}
	if h.State == string(pluginhost.StoreDown) {
		return "DOWN"
	}
	return h.State
}

// oneLine fits s in a table cell; a cut says where the rest is.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 100 {
		s = s[:80] + "... (--format json for all)"
	}
	return s
}

func pluginsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "plugins", Short: "List plugins or print a plugin binary's checksum"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List configured plugins with state, restarts, version and last stderr lines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, printed, err := show(g, 15*time.Second, (*client).Plugins)
			if err != nil || printed {
				return err
			}
			if len(body.Plugins) == 0 {
				fmt.Fprintln(g.stdout, "no plugins configured (add [[deleter]] or [[dlq_source]] blocks to config.toml)")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tPLUGIN\tSTATE\tRESTARTS\tVERSION\tSHA256\tLAST ERROR")
			for _, p := range body.Plugins {
				sum := p.SHA256
				if len(sum) > 12 {
					sum = sum[:12]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Kind, p.Plugin, p.State, p.Restarts, p.Version, sum, oneLine(p.LastError))
			}
			w.Flush()
			for _, p := range body.Plugins {
				if len(p.StderrTail) > 0 && p.State != string(pluginhost.StateRunning) {
					fmt.Fprintf(g.stdout, "\n%s: last stderr lines\n", p.Name)
					for _, l := range p.StderrTail {
						fmt.Fprintln(g.stdout, "  "+oneLine(l))
					}
				}
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "checksum PATH",
		Short: "Print the SHA-256 of a plugin binary, for sha256 = \"...\" in config.toml",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := pluginhost.FileSHA256(args[0])
			if err != nil {
				return localErrorf("%v", err)
			}
			if g.json() {
				return g.printValue(map[string]string{"path": args[0], "sha256": sum})
			}
			fmt.Fprintf(g.stdout, "%s  %s\n", sum, args[0])
			return nil
		},
	})
	return cmd
}
