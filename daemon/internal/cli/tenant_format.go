package cli

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// printCounts shows what a deletion would remove: per deleter, and under
// each one its tables or key patterns, so that an operator sees what will
// go before confirming.
func printCounts(g *globals, body *wire.Counts) {
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "tenant\t%s\n\n", body.TenantID)
	fmt.Fprintln(w, "DELETER\tITEMS")
	for _, n := range sortedKeys(body.Counts) {
		fmt.Fprintf(w, "%s\t%d\n", n, body.Counts[n])
		printBreakdown(w, body.Breakdown[n], "", "")
	}
	for _, f := range body.Failed {
		fmt.Fprintf(w, "%s\tFAILED (below)\n", f.Deleter)
	}
	if body.Complete {
		fmt.Fprintf(w, "total\t%d\n", body.Total)
	} else {
		fmt.Fprintf(w, "total\t%d or more: %s could not count\n", body.Total, plural(len(body.Failed), "deleter"))
	}
	w.Flush()
	// Errors in full, wrapped: they say what to fix, and a table column
	// would cut them.
	for _, f := range body.Failed {
		fmt.Fprintf(g.stdout, "\n%s failed:\n", f.Deleter)
		for _, line := range wrap(f.Error, 96) {
			fmt.Fprintf(g.stdout, "  %s\n", line)
		}
	}
}

// wrap breaks s into lines of at most width bytes at spaces (a longer word
// stays whole).
func wrap(s string, width int) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > width {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// writeTrimmed writes text without the spaces tabwriter leaves at the end
// of a line whose last cells are empty.
func writeTrimmed(out io.Writer, text string) {
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		end := ""
		if strings.HasSuffix(line, "\n") {
			end = "\n"
		}
		fmt.Fprint(out, strings.TrimRight(line, " \n")+end)
	}
}

// printBreakdown writes one indented line per key of b, in key order; cols
// are the tab-separated columns between the key and the count, after the
// cells after it. A sub-row must have as many cells as the rows around it:
// tabwriter aligns a column only over consecutive lines that have it, so
// a shorter sub-row would cut the table into blocks aligned each alone.
func printBreakdown(w io.Writer, b map[string]int64, cols, after string) {
	for _, k := range sortedKeys(b) {
		fmt.Fprintf(w, "  %s\t%s%d%s\n", oneLine(k), cols, b[k], after)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func summarize(ds []wire.DeleterProgress) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%s:%s", d.Name, strings.ToLower(string(d.Status))))
	}
	return strings.Join(parts, " ")
}

// printJob shows a job and its report: each deleter with what it deleted
// per table or key pattern, and what the verification counted.
func printJob(g *globals, job *wire.Job) {
	if g.json() {
		_ = g.printValue(job)
		return
	}
	out := g.stdout
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "job\t%s\n", job.ID)
	fmt.Fprintf(w, "tenant\t%s\n", job.TenantID)
	fmt.Fprintf(w, "status\t%s\n", job.Status)
	if job.OnHold {
		fmt.Fprintf(w, "on hold\tyes: the job waits until the tenant's legal hold is released (lifecycled tenant holds %s)\n", job.TenantID)
	}
	fmt.Fprintf(w, "verified\t%v\n", job.Verified)
	fmt.Fprintf(w, "attempts\t%d\n", job.Attempts)
	fmt.Fprintf(w, "created\t%s%s\n", job.CreatedAt, byUID(job.RequestedByUID))
	if job.NotBefore != nil {
		fmt.Fprintf(w, "not before\t%s\n", *job.NotBefore)
	}
	if job.PlanHash != nil {
		fmt.Fprintf(w, "plan\t%s\n", *job.PlanHash)
	}
	if job.ApprovedAt != nil {
		fmt.Fprintf(w, "approved\t%s%s\n", *job.ApprovedAt, byUID(job.ApprovedByUID))
	} else if job.Status == deletion.JobAwaitingApproval {
		fmt.Fprintf(w, "approval\twaiting: lifecycled tenant plan %s, then lifecycled tenant approve %s --plan-hash H\n", job.TenantID, job.TenantID)
	}
	if job.StartedAt != nil {
		fmt.Fprintf(w, "started\t%s\n", *job.StartedAt)
	}
	if job.CancelRequestedAt != nil {
		fmt.Fprintf(w, "cancelled\t%s%s\n", *job.CancelRequestedAt, byUID(job.CancelledByUID))
	}
	if job.FinishedAt != nil {
		fmt.Fprintf(w, "finished\t%s\n", *job.FinishedAt)
	}
	if job.NextAttemptAt != nil && (job.Status == deletion.JobPartial || job.Status == deletion.JobScheduled) {
		fmt.Fprintf(w, "next attempt\t%s\n", *job.NextAttemptAt)
	}
	if job.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", oneLine(job.LastError))
	}
	w.Flush()
	fmt.Fprintln(out)
	var table bytes.Buffer
	w = tabwriter.NewWriter(&table, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "DELETER\tSTATUS\tDELETED\tTOTAL\tATTEMPTS\tERROR")
	for _, d := range job.Deleters {
		total := "-"
		if d.Total != nil {
			total = fmt.Sprint(*d.Total)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\n", d.Name, d.Status, d.DeletedCount, total, d.Attempts, oneLine(d.Error))
		printBreakdown(w, d.Breakdown, "\t", "\t\t\t") // TOTAL and ATTEMPTS empty
	}
	w.Flush()
	writeTrimmed(out, table.String())
	if len(job.Report.Verification) == 0 {
		return
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "VERIFIED\tMETHOD\tLEFT")
	for _, n := range sortedKeys(job.Report.Verification) {
		v := job.Report.Verification[n]
		method := v.Method
		if method == "" {
			method = deletion.MethodCount
		}
		fmt.Fprintf(w, "%s\t%s\t%d\n", n, method, v.Count)
		if len(v.Checks) == 0 {
			printBreakdown(w, v.Breakdown, "\t", "")
		}
		for _, c := range v.Checks {
			fmt.Fprintf(w, "  %s\t%s\t%d\n", c.Kind, proofTarget(c), c.Found)
		}
	}
	w.Flush()
}

// proofTarget says what a proof check looked at: "public.docs (12
// recorded)", "public.docs (kept: ignore_tables)".
func proofTarget(c deletion.ProofCheck) string {
	s := c.Target
	switch {
	case c.Kind == "identities":
		s += fmt.Sprintf(" (%d recorded)", c.Checked)
	case c.Checked > 0:
		s += fmt.Sprintf(" (%d checked)", c.Checked)
	}
	if c.Detail != "" {
		s += ": " + oneLine(c.Detail)
	}
	return s
}

func byUID(uid *int64) string {
	if uid == nil {
		return ""
	}
	return fmt.Sprintf(" by uid %d", *uid)
}

// printJobList shows one line per job: what it is waiting for or when it
// ended, and how much it deleted.
func printJobList(g *globals, body wire.JobPage) {
	w := tabwriter.NewWriter(g.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tTENANT\tSTATUS\tCREATED\tSTARTS/STARTED\tFINISHED\tDELETED\tNOTE")
	for _, j := range body.Jobs {
		var deleted int64
		for _, d := range j.Deleters {
			deleted += d.DeletedCount
		}
		starts := "-"
		switch {
		case j.StartedAt != nil:
			starts = *j.StartedAt
		case j.NotBefore != nil:
			starts = *j.NotBefore
		}
		finished := "-"
		if j.FinishedAt != nil {
			finished = *j.FinishedAt
		}
		var notes []string
		if j.OnHold {
			notes = append(notes, "on hold")
		}
		if j.Verified {
			notes = append(notes, "verified")
		}
		if j.CancelRequestedAt != nil && j.Status != deletion.JobCancelled {
			notes = append(notes, "stopping")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, j.TenantID, j.Status, j.CreatedAt, starts, finished, deleted,
			strings.Join(notes, ", "))
	}
	w.Flush()
	if body.NextCursor != nil {
		fmt.Fprintf(g.stdout, "more: --cursor %s (or --all)\n", *body.NextCursor)
	}
}
