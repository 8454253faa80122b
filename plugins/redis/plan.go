package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// Plan is a step per configured pattern, in configuration order, with
// Count's exact count. The steps name the patterns with their {tenant}
// placeholder, never the tenant id, so that every tenant's plan reads the
// same; the fingerprint covers the database number and the patterns in
// order (a key matching two patterns is deleted under the first).
func (d *deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	cfg, c, err := d.current(req.TenantID)
	if err != nil {
		return nil, err
	}
	breakdown, _, err := countKeys(ctx, cfg, c, req.TenantID)
	if err != nil {
		return nil, err
	}
	resp := &sdk.PlanResponse{Fingerprint: planFingerprint(cfg)}
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

// planFingerprint hashes the database number and the patterns, in order.
// The address, credentials, scan and batch sizes are left out: they change
// how fast, not what is deleted.
func planFingerprint(cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lifecycled redis plan 1\ndb %d\n", cfg.DB)
	for _, p := range cfg.Patterns {
		fmt.Fprintf(&b, "pattern %q\n", p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}
