package main

import (
	"context"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Plan is a step per configured pattern, in configuration order, with
// Count's exact count. The steps name the patterns with their {tenant}
// placeholder, never the tenant id, so that every tenant's plan reads the
// same; the fingerprint covers the database number and the patterns in
// order (a key matching two patterns is deleted under the first) and the
// server it is connected to (planLines).
func (d *deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	cfg, c, err := d.current(req.TenantID)
	if err != nil {
		return nil, err
	}
	breakdown, _, err := countKeys(ctx, cfg, c, req.TenantID)
	if err != nil {
		return nil, err
	}
	resp := &sdk.PlanResponse{Fingerprint: d.fps.Of(planLines(cfg))}
	seen := map[string]bool{}
	for _, p := range cfg.Patterns {
		if seen[p] {
			continue // counted under its first occurrence, as Count does
		}
		seen[p] = true
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: p, Via: via(cfg, p), Expected: breakdown[p]})
	}
	if len(cfg.Patterns) > 1 {
		resp.Notes = append(resp.Notes, fmt.Sprintf("one SCAN MATCH %s over db %d finds the candidates, each key is matched against the patterns in order and counted under the first it matches",
			placeholderScan, cfg.DB))
	}
	return resp, nil
}

// placeholderScan is the MATCH of the one scan with several patterns.
const placeholderScan = "*{tenant}*"

func via(cfg config, pattern string) string {
	if len(cfg.Patterns) == 1 {
		return fmt.Sprintf("SCAN MATCH %s in db %d", pattern, cfg.DB)
	}
	return fmt.Sprintf("SCAN MATCH %s in db %d, keys matching %s", placeholderScan, cfg.DB, pattern)
}

// planLines are the facts the plan is computed from, for
// sdk.Fingerprints: the server's address and the database number (an
// approved plan is for this Redis, not another one holding the same key
// layout; not the run_id, which changes with every restart) and the
// patterns in order. Credentials, scan and batch sizes are left out: they
// change how fast, not what is deleted.
func planLines(cfg config) []string {
	lines := []string{"lifecycled redis plan 2", fmt.Sprintf("store addr %q db %d", cfg.Addr, cfg.DB), fmt.Sprintf("patterns %q", cfg.Patterns)}
	for _, p := range cfg.Patterns {
		lines = append(lines, fmt.Sprintf("pattern %q", p))
	}
	return lines
}
