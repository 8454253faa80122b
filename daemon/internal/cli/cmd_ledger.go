package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func ledgerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "ledger", Short: "Export, import and verify the signed erasure ledger; re-verify it now"}
	cmd.AddCommand(ledgerExportCmd(g), ledgerImportCmd(g), ledgerVerifyCmd(g), ledgerReverifyCmd(g))
	return cmd
}

func ledgerExportCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export --out FILE",
		Short: "Write the whole erasure ledger as a file signed with the daemon's receipt key",
		Long: `Write the whole erasure ledger (every COMPLETED, verified erasure: tenant,
job, time, receipt hash) to FILE, signed with the daemon's Ed25519 receipt
key. Keep it apart from the state store's backups: after a restore of the
state store, "lifecycled ledger import FILE" brings back the entries the
restored store lacks. FILE is written aside and renamed into place.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("--out FILE is required")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(10 * time.Minute)
			defer cancel()
			tmp, err := os.CreateTemp(filepath.Dir(out), ".ledger-*")
			if err != nil {
				return localErrorf("write ledger: %v", err)
			}
			defer os.Remove(tmp.Name())
			if err := c.ExportLedger(ctx, tmp); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Sync(); err != nil {
				tmp.Close()
				return localErrorf("write ledger: %v", err)
			}
			if err := tmp.Close(); err != nil {
				return localErrorf("write ledger: %v", err)
			}
			if err := os.Chmod(tmp.Name(), 0o644); err != nil {
				return localErrorf("write ledger: %v", err)
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return localErrorf("write ledger: %v", err)
			}
			fmt.Fprintf(g.stderr, "ledger written to %s; check it with: lifecycled ledger verify %s\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write the signed ledger to")
	return cmd
}

func ledgerImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Add the entries of a signed ledger file that the ledger lacks (idempotent)",
		Long: `Send a ledger file (from "lifecycled ledger export") to the daemon, which
checks its signature against the receipt keys registered in its state store
and adds, in one transaction, the entries it does not have. A file that does
not verify changes nothing: SYS_LEDGER_INVALID (changed, cut short, not a
ledger) or SYS_LEDGER_KEY_UNKNOWN (signed by a key the store does not know),
exit status 2. Importing the same file again adds nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return localErrorf("read ledger: %v", err)
			}
			body, printed, err := show(g, 10*time.Minute, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.LedgerImport, error) {
				return c.ImportLedger(ctx, data, opts...)
			})
			if err != nil || printed {
				return err
			}
			fmt.Fprintf(g.stdout, "imported %s: %d entries, %d added, %d already in the ledger (signed by %s)\n",
				args[0], body.Entries, body.Added, body.AlreadyPresent, body.KeyID)
			return nil
		},
	}
}

func ledgerVerifyCmd(g *globals) *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "verify FILE [--key PUB]",
		Short: "Check a signed ledger file; offline with --key",
		Long: `Check a ledger file and say what was checked: one strict JSON object of type
lifecycled.erasure-ledger; the public key (--key: a PEM PUBLIC KEY, the JSON
of GET /api/v1/receipts/key or the base64 of the key; without --key the
daemon is asked for the key the file names) is the one the file names; the
Ed25519 signature matches the RFC 8785 canonical form of every member but
"signature"; every entry is well formed, no job appears twice, and
entry_count is the number of entries.

Exit status 0 when valid, 4 when the file is not valid, 1 when the check
could not be made (no file, no key).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, keys, lastKeyErr, err := verifyInput(g, args[0], keyFile, "ledger")
			if err != nil {
				return err
			}
			rep := ledger.Verify(data, keys, nil)
			if g.json() {
				_ = g.printValue(rep)
			} else {
				printChecks(g, args[0], rep.Checks)
				if rep.Valid {
					fmt.Fprintf(g.stdout, "VALID: %d erasures, exported %s by %s\n", len(rep.Entries), rep.File.ExportedAt, rep.File.Daemon.ID)
				} else {
					fmt.Fprintln(g.stdout, "INVALID: do not import or rely on this ledger file")
				}
			}
			return verdict(lastKeyErr, rep.Valid, "ledger file not valid")
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "public key file (PEM, the JSON of GET /api/v1/receipts/key, or base64); default: ask the daemon")
	return cmd
}

func ledgerReverifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reverify",
		Short: "Start a re-verification pass of every ledger tenant now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, printed, err := show(g, 30*time.Second, (*client).Reverify)
			if err != nil || printed {
				return err
			}
			fmt.Fprintln(g.stdout, body.Message)
			return nil
		},
	}
}
