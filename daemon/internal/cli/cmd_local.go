package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/app"
	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

func runCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon",
		Long: `Run the daemon in the foreground (systemd Type=notify). SIGHUP reloads the
config; SIGTERM and SIGINT drain within daemon.shutdown_timeout and exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				path = defaultConfigPath()
			}
			// Signals are handled by app.Run; the context only ends on a
			// second interrupt, which forces the exit.
			err := app.Run(context.Background(), app.Options{ConfigPath: path, Stderr: g.stderr})
			var ce *app.ConfigError
			if errors.As(err, &ce) {
				return &exitError{code: app.ExitConfig, err: fmt.Errorf("%v", ce.Err)}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "config file (default ./config.toml if present, else /etc/lifecycled/config.toml)")
	return cmd
}

// validatePlugins starts every configured plugin as the daemon would
// (binary, checksum, permissions, handshake, Configure against its store),
// reports each one's outcome, and stops them. A Kafka source is configured
// but never fetches, so it joins no consumer group.
func validatePlugins(g *globals, cfg *config.Config) error {
	if len(cfg.Instances()) == 0 {
		return nil
	}
	log := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	host := pluginhost.New(app.PluginOptions(cfg), log, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(cfg.Instances())+1)*cfg.Plugins.StartTimeout.Duration+time.Minute)
	defer cancel()
	if err := host.Start(ctx); err != nil {
		return &exitError{code: ExitLocal, err: err}
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = host.Stop(stop)
	}()
	var failed []string
	for _, info := range host.Status() {
		if err := host.Check(info.Name); err != nil {
			// Why, once: the plugin's last error when it did not start (its
			// state, starting again or failed, depends on the moment), else
			// what Check says (a store down).
			why := info.LastError
			if why == "" {
				why = err.Error()
			}
			fmt.Fprintf(g.stdout, "plugin %s (%s): failed: %s\n", info.Name, info.Plugin, why)
			failed = append(failed, info.Name)
			continue
		}
		fmt.Fprintf(g.stdout, "plugin %s (%s): ok, version %s\n", info.Name, info.Plugin, info.Version)
		for _, w := range info.Warnings {
			fmt.Fprintf(g.stdout, "  warning: %s\n", w)
		}
	}
	if len(failed) > 0 {
		return &exitError{code: ExitLocal, err: fmt.Errorf("%s failed: %s", plural(len(failed), "plugin"), strings.Join(failed, ", "))}
	}
	return nil
}

// plural spells a count with its noun: "1 dlq source", "2 deleters".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		path = defaultConfigPath()
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, &exitError{code: ExitLocal, err: err}
	}
	return cfg, nil
}

func configCmd(g *globals) *cobra.Command {
	var path string
	var withoutSecrets, withPlugins, noPlugins bool
	cmd := &cobra.Command{Use: "config", Short: "Check, print or dump the config"}
	cmd.PersistentFlags().StringVar(&path, "config", "", "config file (default ./config.toml if present, else /etc/lifecycled/config.toml)")
	validate := &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check the config; print every problem with its file, line and key",
		Long: `Check the config (FILE, or --config) and print every problem, once, with its file, line and key.
Then start every plugin it names, as the daemon would (binary, checksum, permissions, handshake,
Configure against its store), print each one's outcome, and stop them: exit 1 if any failed.
--no-plugins checks the file alone. --without-secrets checks everything but the secret files
(*_file keys are neither read nor expanded, and no plugin is started), so that a config written
for systemd's LoadCredential= (${CREDENTIALS_DIRECTORY}) can be checked before it is installed.`,
		Example: `  lifecycled config validate /etc/lifecycled/config.toml`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if path != "" && path != args[0] {
					return usageErrorf("give the config file once: as FILE or as --config, not both")
				}
				path = args[0]
			}
			if path == "" {
				path = defaultConfigPath()
			}
			cfg, err := config.LoadWith(path, config.ParseOptions{WithoutSecrets: withoutSecrets})
			if err != nil {
				return &exitError{code: ExitLocal, err: err}
			}
			note := ""
			if withoutSecrets {
				note = "; secret files not checked"
			}
			switch {
			case noPlugins:
				note += "; plugins not started (--no-plugins)"
			case withoutSecrets:
				// Their configs hold the secrets that were not read: a plugin
				// could only fail to reach its store.
				note += "; plugins not started (their secrets were not read)"
			case len(cfg.Instances()) > 0:
				if err := validatePlugins(g, cfg); err != nil {
					return err
				}
				note += "; every plugin started and accepted its config"
			}
			fmt.Fprintf(g.stdout, "%s: valid (%s, %s%s)\n", cfg.Path, plural(len(cfg.Deleters), "deleter"), plural(len(cfg.DLQSources), "dlq source"), note)
			return nil
		},
	}
	validate.Flags().BoolVar(&withoutSecrets, "without-secrets", false, "check everything but the secret files (*_file keys)")
	validate.Flags().BoolVar(&noPlugins, "no-plugins", false, "check the file alone: do not start each plugin to let it check its config and reach its store")
	validate.Flags().BoolVar(&withPlugins, "plugins", true, "start each plugin and let it check its config (and reach its store), then stop it: the default")
	_ = validate.Flags().MarkDeprecated("plugins", "it is the default now (--no-plugins skips it)")
	cmd.AddCommand(validate, &cobra.Command{
		Use:   "default",
		Short: "Print the default config for a packaged install",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(g.stdout, config.DefaultTOML())
			return nil
		},
	}, &cobra.Command{
		Use:   "dump",
		Short: "Print the effective config (defaults and ${VAR} applied) with secrets redacted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			out, err := config.Dump(cfg)
			if err != nil {
				return err
			}
			fmt.Fprint(g.stdout, out)
			return nil
		},
	})
	return cmd
}

func migrateCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{Use: "migrate", Short: "Apply or show state-store migrations (run also applies them)"}
	cmd.PersistentFlags().StringVar(&path, "config", "", "config file (default ./config.toml if present, else /etc/lifecycled/config.toml)")
	show := func(st migrations.Status, d config.StateKind) error {
		if g.json() {
			return g.printValue(map[string]any{"dialect": d, "current": st.Current, "latest": st.Latest, "dirty": st.Dirty, "pending": nonNilStrings(st.Pending)})
		}
		fmt.Fprintf(g.stdout, "state store: %s\ncurrent version: %d\nlatest known: %d\ndirty: %v\n", d, st.Current, st.Latest, st.Dirty)
		if len(st.Pending) == 0 {
			fmt.Fprintln(g.stdout, "pending: none")
		}
		for _, p := range st.Pending {
			fmt.Fprintln(g.stdout, "pending:", p)
		}
		return nil
	}
	run := func(up bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			kind, dsn, err := cfg.StateDSN()
			if err != nil {
				return localErrorf("%v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var st migrations.Status
			if up {
				st, err = store.MigrateUp(ctx, migrations.Dialect(kind), dsn)
			} else {
				st, err = store.MigrationStatus(ctx, migrations.Dialect(kind), dsn)
				if err == nil && st.Current > st.Latest {
					err = fmt.Errorf("%w: database is at version %d, this binary knows up to %d", migrations.ErrSchemaNewer, st.Current, st.Latest)
				}
			}
			if err != nil {
				return localErrorf("%v", err)
			}
			return show(st, kind)
		}
	}
	cmd.AddCommand(
		&cobra.Command{Use: "up", Short: "Apply pending migrations", Args: cobra.NoArgs, RunE: run(true)},
		&cobra.Command{Use: "status", Short: "Show the schema version and pending migrations", Args: cobra.NoArgs, RunE: run(false)},
	)
	return cmd
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := buildinfo.Get()
			if g.json() {
				return g.printValue(bi)
			}
			fmt.Fprintf(g.stdout, "lifecycled %s (commit %s, %s, plugin protocol %d)\n", bi.Version, bi.Commit, bi.GoVersion, bi.PluginProtocol)
			return nil
		},
	}
}

// interruptible returns a context cancelled by SIGINT/SIGTERM, for long
// client commands (tenant delete --wait).
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
