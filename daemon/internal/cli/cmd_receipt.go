package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
)

func tenantReceiptCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "receipt TENANT [-o FILE]",
		Short: "Get the signed erasure receipt of the tenant's latest job (COMPLETED and verified)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(time.Minute)
			defer cancel()
			raw, err := c.Receipt(ctx, args[0])
			if err != nil {
				return err
			}
			if out == "" {
				g.printRaw(raw)
				return nil
			}
			// The receipt as issued, byte for byte: it verifies as it is.
			if err := os.WriteFile(out, raw, 0o644); err != nil {
				return localErrorf("write receipt: %v", err)
			}
			fmt.Fprintf(g.stderr, "receipt written to %s; check it with: lifecycled receipt verify %s\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the receipt to this file instead of stdout")
	return cmd
}

func receiptCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "receipt", Short: "Verify erasure receipts, get the daemon's receipt key, make a key"}
	cmd.AddCommand(receiptVerifyCmd(g), receiptKeyCmd(g), receiptKeygenCmd(g))
	return cmd
}

func receiptVerifyCmd(g *globals) *cobra.Command {
	var (
		keyFile     string
		reformatted bool
	)
	cmd := &cobra.Command{
		Use:   "verify FILE [--key PUB]",
		Short: "Check a signed erasure receipt; offline with --key",
		Long: `Check a signed erasure receipt and say what was checked: that FILE is one JSON
receipt; that the public key (--key: a PEM PUBLIC KEY, the JSON of GET
/api/v1/receipts/key or the base64 of the key; without --key the daemon is
asked for the key the receipt names) is the key the receipt names; that the
Ed25519 signature matches the RFC 8785 canonical form of every field but
"signature"; that the content claims a complete, verified erasure (nothing
left in any deleter, the total adds up, the times are in order); and that
the file is byte for byte the receipt as issued.

Exit status 0 when valid, 4 when the receipt is not valid, 1 when the check
could not be made (no file, no key).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, keys, lastKeyErr, err := verifyInput(g, args[0], keyFile, "receipt")
			if err != nil {
				return err
			}
			rep := receipt.Verify(data, keys, receipt.Options{AllowReformatted: reformatted})
			if g.json() {
				_ = g.printValue(rep)
			} else {
				printVerification(g, args[0], rep)
			}
			return verdict(lastKeyErr, rep.Valid, "receipt not valid")
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "public key file (PEM, the JSON of GET /api/v1/receipts/key, or base64); default: ask the daemon")
	cmd.Flags().BoolVar(&reformatted, "allow-reformatted", false, "accept a receipt whose JSON was laid out anew (indented, reordered)")
	return cmd
}

// daemonKey asks the daemon for the registered key the receipt names.
func daemonKey(g *globals) receipt.KeyResolver {
	return func(keyID string) (ed25519.PublicKey, string, error) {
		c, err := g.client()
		if err != nil {
			return nil, "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		raw, err := c.ReceiptKey(ctx, keyID)
		if err != nil {
			return nil, "", fmt.Errorf("ask the daemon at %s (give --key to check offline): %w", c.addr, err)
		}
		pub, err := receipt.ParsePublicKey(raw)
		if err != nil {
			return nil, "", err
		}
		return pub, "the daemon at " + c.addr, nil
	}
}

// verdict is the exit of a verify command. A key that could not be had is
// not a verdict on the file (a key the daemon's store never registered is
// one: no daemon of it signed the file); then the file's validity.
func verdict(lastKeyErr func() error, valid bool, invalid string) error {
	var se *serverError
	if keyErr := lastKeyErr(); keyErr != nil && !(errors.As(keyErr, &se) && se.Status == 404) {
		return &exitError{code: ExitLocal, silent: true, err: keyErr}
	}
	if !valid {
		return &exitError{code: ExitInvalid, silent: true, err: errors.New(invalid)}
	}
	return nil
}

// printChecks says what a verify command checked in the file name.
func printChecks(g *globals, name string, checks []receipt.Check) {
	fmt.Fprintf(g.stdout, "checked %s:\n", name)
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(g.stdout, "  %s  %-9s %s\n", mark, c.Name, c.Detail)
	}
}

func printVerification(g *globals, name string, rep receipt.Report) {
	printChecks(g, name, rep.Checks)
	if !rep.Valid {
		fmt.Fprintln(g.stdout, "INVALID: do not rely on this receipt")
		return
	}
	d := rep.Doc
	fmt.Fprintf(g.stdout, "VALID: tenant %s erased by job %s, started %s, finished %s: %d items in %s, nothing left\n",
		d.TenantID, d.JobID, d.StartedAt, d.FinishedAt, d.DeletedTotal, plural(len(d.Deleters), "deleter"))
}

func receiptKeyCmd(g *globals) *cobra.Command {
	var (
		out   string
		keyID string
	)
	cmd := &cobra.Command{
		Use:   "key [-o FILE]",
		Short: "Get the public key that verifies the daemon's receipts (PEM)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(30 * time.Second)
			defer cancel()
			raw, err := c.ReceiptKey(ctx, keyID)
			if err != nil {
				return err
			}
			var body receipt.KeyBody
			if err := json.Unmarshal(raw, &body); err != nil {
				return fmt.Errorf("decode the daemon's key: %w", err)
			}
			if out != "" {
				if err := os.WriteFile(out, []byte(body.PublicKeyPEM), 0o644); err != nil {
					return localErrorf("write key: %v", err)
				}
				fmt.Fprintf(g.stderr, "public key %s written to %s\n", body.KeyID, out)
				return nil
			}
			if g.json() {
				g.printRaw(raw)
				return nil
			}
			fmt.Fprintf(g.stdout, "key_id %s (%s)\n%s", body.KeyID, body.Algorithm, body.PublicKeyPEM)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the PEM public key to this file")
	cmd.Flags().StringVar(&keyID, "key-id", "", "another registered key (a receipt's key_id) instead of the one the daemon signs with")
	return cmd
}

func receiptKeygenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "keygen FILE",
		Short: "Make an Ed25519 receipt key (mode 0600) for [deletion] receipt_key_file",
		Long: `Write a new Ed25519 private key (PEM, PKCS #8) to FILE with mode 0600, refusing to
replace a file, and print its public key. Set [deletion] receipt_key_file to it
on every daemon that shares a state store, so that all sign with one key.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			priv, err := receipt.GenerateKey(args[0])
			if err != nil {
				return localErrorf("%v", err)
			}
			pub := priv.Public().(ed25519.PublicKey)
			fmt.Fprintf(g.stdout, "private key written to %s (mode 0600)\nkey_id %s\n%s", args[0], receipt.KeyID(pub), receipt.PublicPEM(pub))
			return nil
		},
	}
}

// verifyKeys is how `receipt verify` and `ledger verify` find the public
// key a signed file names: the PEM of --key when given, else the daemon's
// (lastErr then says why the daemon could not give it, if it could not).
// verifyInput is what a verify command checks: the file (what names it in
// the error) and the keys to check it with.
func verifyInput(g *globals, file, keyFile, what string) ([]byte, receipt.KeyResolver, func() error, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, nil, localErrorf("read %s: %v", what, err)
	}
	keys, lastKeyErr, err := verifyKeys(g, keyFile)
	return data, keys, lastKeyErr, err
}

func verifyKeys(g *globals, keyFile string) (keys receipt.KeyResolver, lastErr func() error, err error) {
	if keyFile != "" {
		raw, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, nil, localErrorf("read key: %v", err)
		}
		pub, err := receipt.ParsePublicKey(raw)
		if err != nil {
			return nil, nil, localErrorf("key %s: %v", keyFile, err)
		}
		return func(string) (ed25519.PublicKey, string, error) { return pub, keyFile, nil }, func() error { return nil }, nil
	}
	ask := daemonKey(g)
	var keyErr error
	keys = func(id string) (ed25519.PublicKey, string, error) {
		pub, from, err := ask(id)
		keyErr = err
		return pub, from, err
	}
	return keys, func() error { return keyErr }, nil
}
