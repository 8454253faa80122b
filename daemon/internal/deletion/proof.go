package deletion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
)

// Verification methods: how a deleter's "nothing left" was established.
const (
	// MethodIndependent: the deleter's own proof (sdk.Verifier), by a path
	// independent of its deletion: identities recorded before the delete
	// looked up after it, the catalogue re-read, orphans looked for.
	MethodIndependent = "independent"
	// MethodCount: the deleter's Count after the delete, which follows the
	// deletion's own model; for deleters that prove nothing of their own.
	MethodCount = "count"
)

// Verification is what established, for one deleter, that nothing of the
// tenant is left after a job's deletes: zero left everywhere is what makes
// a job verified.
type Verification struct {
	// Count is what was found left: items counted, or (independent)
	// the sum of the checks that found something.
	Count int64 `json:"count"`
	// Breakdown is Count per table, key pattern, ... (count), or per
	// check target that found something (independent).
	Breakdown map[string]int64 `json:"breakdown"`
	// Method is MethodIndependent or MethodCount; empty in jobs verified
	// before methods were recorded (a count).
	Method string `json:"method,omitempty"`
	// Checks are the independent proof's checks: the delete's own (the
	// identities it recorded) and the verification's.
	Checks []ProofCheck `json:"checks,omitempty"`
}

// ProofCheck is one check of an independent proof (sdk.ProofCheck, as
// stored and shown).
type ProofCheck struct {
	Kind    string `json:"kind"`
	Target  string `json:"target"`
	Checked int64  `json:"checked"`
	Found   int64  `json:"found"`
	Detail  string `json:"detail,omitempty"`
}

// Left reports whether the check found something the erasure should have
// removed (what the config keeps on purpose is reported, not left).
func (c ProofCheck) Left() bool { return c.Kind != string(sdk.ProofKept) && c.Found != 0 }

func proofChecks(in []sdk.ProofCheck) []ProofCheck {
	var out []ProofCheck
	for _, c := range in {
		out = append(out, ProofCheck{Kind: string(c.Kind), Target: c.Target, Checked: c.Checked, Found: c.Found, Detail: c.Detail})
	}
	return out
}

// verifyOutcome is one deleter's verification: what it found, or why it
// could not look.
type verifyOutcome struct {
	v   Verification
	err error
}

// VerifySome verifies the named deleters after their deletes: with the
// deleter's own independent proof where it has one (sdk.Verifier), else
// with a count. deleteProof holds, by deleter, the checks its last
// successful Delete reported; they are part of its proof.
func (r *Registry) VerifySome(ctx context.Context, tenant string, names []string, deleteProof map[string][]ProofCheck) map[string]verifyOutcome {
	out := map[string]verifyOutcome{}
	var mu sync.Mutex
	r.each(ctx, names, func(name string) {
		o := r.verifyOne(ctx, tenant, name, deleteProof[name])
		mu.Lock()
		out[name] = o
		mu.Unlock()
	})
	return out
}

func (r *Registry) verifyOne(ctx context.Context, tenant, name string, deleteProof []ProofCheck) verifyOutcome {
	d, err := r.src.Deleter(name)
	if err != nil {
		return verifyOutcome{err: err}
	}
	if v, ok := d.(sdk.Verifier); ok {
		resp, err := v.Verify(ctx, &sdk.VerifyRequest{TenantID: tenant})
		switch {
		case err == nil:
			checks := append(append([]ProofCheck(nil), deleteProof...), proofChecks(resp.Checks)...)
			ver := Verification{Method: MethodIndependent, Checks: checks, Breakdown: map[string]int64{}}
			for _, c := range checks {
				if c.Left() {
					ver.Count += c.Found
					ver.Breakdown[c.Kind+" "+c.Target] += c.Found
				}
			}
			return verifyOutcome{v: ver}
		case !errors.Is(err, sdk.ErrUnsupported):
			return verifyOutcome{err: err}
		}
	}
	resp, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenant})
	if err != nil {
		return verifyOutcome{err: err}
	}
	return verifyOutcome{v: Verification{Method: MethodCount, Count: resp.Count, Breakdown: copyBreakdown(resp.Breakdown)}}
}

// leftText names what a proof found left, for an error.
func leftText(v Verification) string {
	var parts []string
	for _, c := range v.Checks {
		if !c.Left() {
			continue
		}
		p := fmt.Sprintf("%s %s: %d", c.Kind, c.Target, c.Found)
		if c.Detail != "" {
			p += " (" + c.Detail + ")"
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
