package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func tenantPlanCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "plan TENANT",
		Short: "Show the deletion plan: per deleter what would be deleted, how it is reached, and the plan hash",
		Long: `Ask every configured deleter what it would delete for the tenant now and how
(table / key pattern, tenant column / foreign key path / SCAN MATCH / Query),
with counts, notes and the fingerprint of the schema or config it planned from.

The plan hash covers the deleters, their fingerprints and their steps' targets
and vias, not the counts. Pass it to 'tenant delete --plan-hash' or 'tenant
approve --plan-hash': if the plan changed since you read it, nothing happens.
A deleter whose plugin cannot plan is shown as unsupported. Exit 3 when a
deleter could not plan (the plan then has no hash).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, printed, err := show(g, 5*time.Minute, bind(args[0], (*client).Plan))
			if err != nil {
				return err
			}
			var incomplete error
			if !body.Complete {
				n := 0
				for _, d := range body.Deleters {
					if d.Status == deletion.PlanFailed {
						n++
					}
				}
				incomplete = &exitError{code: ExitAttention, silent: g.json(),
					err: fmt.Errorf("incomplete: %s could not plan, so the plan has no hash and cannot be approved", plural(n, "deleter"))}
			}
			if printed {
				return incomplete
			}
			printPlan(g, &body)
			return incomplete
		},
	}
}

func printPlan(g *globals, p *wire.Plan) {
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "tenant\t%s\n", p.TenantID)
	hash := "none (incomplete)"
	if p.PlanHash != nil {
		hash = *p.PlanHash
	}
	fmt.Fprintf(w, "plan hash\t%s\n\n", hash)
	fmt.Fprintln(w, "DELETER / TARGET\tVIA\tEXPECTED")
	for _, d := range p.Deleters {
		switch d.Status {
		case deletion.PlanPlanned:
			fmt.Fprintf(w, "%s\t\t%d\n", d.Name, *d.Expected)
			for _, s := range d.Steps {
				fmt.Fprintf(w, "  %s\t%s\t%d\n", s.Target, s.Via, s.Expected)
			}
		default:
			fmt.Fprintf(w, "%s\t%s\t\n", d.Name, d.Status)
		}
	}
	fmt.Fprintf(w, "total\t\t%d\n", p.ExpectedTotal)
	w.Flush()
	for _, d := range p.Deleters {
		if d.Fingerprint != nil {
			fmt.Fprintf(g.stdout, "\n%s fingerprint %s\n", d.Name, *d.Fingerprint)
		}
		for _, n := range d.Notes {
			fmt.Fprintf(g.stdout, "  note: %s\n", n)
		}
		if d.Status == deletion.PlanFailed {
			fmt.Fprintf(g.stdout, "\n%s could not plan:\n", d.Name)
			for _, line := range wrap(d.Error, 96) {
				fmt.Fprintf(g.stdout, "  %s\n", line)
			}
		}
	}
}

func tenantApproveCmd(g *globals) *cobra.Command {
	var planHash string
	cmd := &cobra.Command{
		Use:   "approve TENANT --plan-hash HASH",
		Short: "Approve the tenant's deletion job that is AWAITING_APPROVAL, for the plan you read",
		Long: `Approve the tenant's deletion job that waits for approval ([deletion]
require_approval, or a plan that changed since the job was created or approved).
--plan-hash is the hash 'lifecycled tenant plan TENANT' showed you: the daemon
computes the plan again and refuses (SYS_TENANT_PLAN_CHANGED) if it differs.
With [deletion] approvers_distinct the approver's uid must differ from the
requester's (SYS_TENANT_APPROVER_NOT_DISTINCT).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if planHash == "" {
				return usageErrorf("--plan-hash is required: the plan hash 'lifecycled tenant plan %s' shows", args[0])
			}
			job, printed, err := show(g, 5*time.Minute, func(c *client, ctx context.Context, opts ...adminclient.Option) (wire.Job, error) {
				return c.Approve(ctx, args[0], wire.ApproveRequest{PlanHash: &planHash}, opts...)
			})
			if err != nil || printed {
				return err
			}
			fmt.Fprintf(g.stdout, "deletion job %s for tenant %s approved by uid %s (requested by uid %s) for plan %s: %s\nfollow it with: lifecycled tenant status %s\n",
				job.ID, job.TenantID, uidText(job.ApprovedByUID), uidText(job.RequestedByUID), planHash, job.Status, job.TenantID)
			return nil
		},
	}
	cmd.Flags().StringVar(&planHash, "plan-hash", "", "the plan hash you read with 'lifecycled tenant plan' (required)")
	return cmd
}
