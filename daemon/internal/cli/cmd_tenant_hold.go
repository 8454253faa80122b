package cli

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/spf13/cobra"
)

func tenantHoldCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "hold TENANT --reason TEXT",
		Short: "Put the tenant under a legal hold: no deletion starts or runs until it is released",
		Long: `Put the tenant under a legal hold. While it holds, a deletion request for the
tenant is refused (SYS_TENANT_ON_HOLD), a scheduled or partial job waits, and a
running one stops at its next batch and waits. Every hold and release is
recorded with the caller's uid (lifecycled tenant holds --include-released).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usageErrorf("--reason is required: the case or ticket that requires the hold")
			}
			h, raw, err := fetch(g, time.Minute, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.Hold, error) {
				return c.Hold(ctx, args[0], wire.HoldRequest{Reason: &reason}, opts...)
			})
			if err != nil {
				return err
			}
			return printHoldAnswer(g, raw, h, "on hold")
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the tenant's data must stay (required)")
	return cmd
}

func tenantReleaseCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "release TENANT",
		Short: "Release the tenant's legal hold; its waiting deletion job runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, raw, err := fetch(g, time.Minute, bind(args[0], (*client).Release))
			if err != nil {
				return err
			}
			return printHoldAnswer(g, raw, h, "released")
		},
	}
}

func printHoldAnswer(g *globals, raw []byte, h wire.Hold, what string) error {
	if g.json() {
		g.printRaw(raw)
		return nil
	}
	fmt.Fprintf(g.stdout, "tenant %s %s: %q (held since %s by uid %s", h.TenantID, what, h.Reason, h.HeldAt, uidText(h.HeldByUID))
	if h.ReleasedAt != nil {
		fmt.Fprintf(g.stdout, ", released %s by uid %s", *h.ReleasedAt, uidText(h.ReleasedByUID))
	}
	fmt.Fprintln(g.stdout, ")")
	return nil
}

func uidText(uid *int64) string {
	if uid == nil {
		return "?"
	}
	return fmt.Sprint(*uid)
}

func tenantHoldsCmd(g *globals) *cobra.Command {
	var (
		released bool
		all      bool
	)
	cmd := &cobra.Command{
		Use:   "holds [TENANT]",
		Short: "List legal holds, newest first (active ones; --include-released for the history)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if released {
				q.Set("include_released", "true")
			}
			if len(args) == 1 {
				q.Set("tenant", args[0])
			}
			var out wire.Holds
			for {
				page, raw, err := within(c, time.Minute, query(q, (*client).Holds))
				if err != nil {
					return err
				}
				if !all && g.json() {
					g.printRaw(raw)
					return nil
				}
				out.Holds = append(out.Holds, page.Holds...)
				out.NextCursor = page.NextCursor
				if !all || page.NextCursor == nil {
					break
				}
				q.Set("cursor", *page.NextCursor)
			}
			if g.json() {
				return g.printValue(out)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "TENANT\tHELD AT\tBY UID\tRELEASED AT\tBY UID\tREASON")
			for _, h := range out.Holds {
				rel, relBy := "-", "-"
				if h.ReleasedAt != nil {
					rel, relBy = *h.ReleasedAt, uidText(h.ReleasedByUID)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", h.TenantID, h.HeldAt, uidText(h.HeldByUID), rel, relBy, oneLine(h.Reason))
			}
			w.Flush()
			if out.NextCursor != nil {
				fmt.Fprintln(g.stdout, "more: --all")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&released, "include-released", false, "list released holds too (the history)")
	cmd.Flags().BoolVar(&all, "all", false, "fetch every page")
	return cmd
}
