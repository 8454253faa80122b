// Package cli is the lifecycled command line: `lifecycled run` starts the
// daemon; every other subcommand is a client of the admin API on the Unix
// socket, or works on local files (config, migrate, plugins checksum).
//
// Exit codes: 0 ok, 1 local error (usage, socket unreachable), 2 the daemon
// answered with an error, 3 the answer needs attention (`status` found the
// daemon degraded, `tenant count` is incomplete, `retry-all` left messages
// unpublished, `dlq list` names a topic nothing was stored for, `tenant
// delete --from` met held tenants, `tenant cancel` came too late), 4 `receipt
// verify` found the receipt not valid, 78 the daemon's config is invalid.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/app"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitLocal  = 1
	ExitServer = 2
	// ExitAttention: the daemon answered, but not everything is well.
	ExitAttention = 3
	// ExitInvalid: `receipt verify` found the receipt not valid.
	ExitInvalid = 4
)

type exitError struct {
	code   int
	err    error
	silent bool // already reported
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func localErrorf(format string, args ...any) error {
	return &exitError{code: ExitLocal, err: fmt.Errorf(format, args...)}
}

func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitLocal, err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error from Execute to the process exit status.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var se *serverError
	if errors.As(err, &se) {
		return ExitServer
	}
	var ce *app.ConfigError
	if errors.As(err, &ce) {
		return app.ExitConfig
	}
	return ExitLocal
}

type globals struct {
	addr   string
	format string
	stdout io.Writer
	stderr io.Writer
}

func (g *globals) client() (*client, error) {
	return newClient(resolveAddr(g.addr))
}

func (g *globals) json() bool { return g.format == "json" }

// printJSON prints an API body unchanged (json format).
func (g *globals) printRaw(body []byte) {
	_, _ = g.stdout.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(g.stdout)
	}
}

func (g *globals) printValue(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, string(b))
	return nil
}

// Execute runs the command line. Errors are printed to stderr here; the
// caller only turns them into an exit status with ExitCode.
func Execute(args []string, stdout, stderr io.Writer) error {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "lifecycled",
		Short: "Data-lifecycle daemon: tenant erasure, dead-letter management, retention",
		Long: `lifecycled erases departed tenants' data from every store, keeps dead-lettered
messages until they are safely replayed, and retires old records on schedule.

'lifecycled run' is the daemon. Every other command talks to a running daemon
over its admin socket (--addr, LIFECYCLED_ADDR, the socket of ./config.toml,
or ` + DefaultAddr + `), or works on local files.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.format != "table" && g.format != "json" {
				return usageErrorf("--format must be table or json; got %q", g.format)
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.addr, "addr", "", "admin socket, unix:///path (env LIFECYCLED_ADDR)")
	root.PersistentFlags().StringVar(&g.format, "format", "table", "output format: table or json (json prints the API body unchanged)")
	root.AddCommand(
		runCmd(g),
		configCmd(g),
		migrateCmd(g),
		versionCmd(g),
		statusCmd(g),
		pluginsCmd(g),
		tenantCmd(g),
		dlqCmd(g),
		archiveCmd(g),
		reloadCmd(g),
		receiptCmd(g),
		ledgerCmd(g),
		uiCmd(g),
	)
	refuseUnknownSubcommands(root)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.silent {
			return err
		}
		fmt.Fprintln(stderr, "lifecycled:", err)
		if g.json() {
			printErrorJSON(stdout, err)
		}
		var se *serverError
		if !errors.As(err, &se) && !errors.As(err, &ee) && !isConfigErr(err) {
			// cobra's own usage errors (unknown flag, wrong args).
			return &exitError{code: ExitLocal, err: err, silent: true}
		}
	}
	return err
}

// refuseUnknownSubcommands makes every command that only groups others
// (dlq, tenant, config, ...) refuse a word that is none of them, with
// cobra's suggestions: cobra runs such a command's help for any
// arguments and exits 0, so a typo (`dlq lst`) looked like success to a
// script. Without arguments it still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErrorf("%s (%s --help lists its commands)", msg, c.CommandPath())
	}
}

// printErrorJSON puts the error on stdout in --format json, so that a script
// reading stdout sees it: the daemon's envelope as it came (with its
// request_id), or one of the same shape for a local error.
func printErrorJSON(stdout io.Writer, err error) {
	var se *serverError
	if errors.As(err, &se) && json.Valid(se.Body) {
		_, _ = stdout.Write(se.Body)
		if n := len(se.Body); n > 0 && se.Body[n-1] != '\n' {
			fmt.Fprintln(stdout)
		}
		return
	}
	env := map[string]any{"error": map[string]any{"code": "CLI_LOCAL_ERROR", "message": err.Error(), "request_id": "", "details": []any{}}}
	b, _ := json.Marshal(env)
	fmt.Fprintln(stdout, string(b))
}

func isConfigErr(err error) bool {
	var ce *app.ConfigError
	return errors.As(err, &ce)
}

// defaultConfigPath: ./config.toml if present, else /etc/lifecycled/config.toml.
func defaultConfigPath() string {
	if _, err := os.Stat("config.toml"); err == nil {
		return "config.toml"
	}
	return "/etc/lifecycled/config.toml"
}
