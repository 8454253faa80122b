package deletion

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func shapeWith(steps ...StepShape) PlanShape {
	return PlanShape{Deleters: []DeleterShape{
		{Name: "redis:sessions", Planner: false, Steps: []StepShape{}},
		{Name: "postgres:app", Planner: true, Fingerprint: "fp1", Steps: steps},
	}}
}

// TestPlanShapeCanonical: the hashed form is RFC 8785 for the shape's
// types: members sorted, no whitespace, only the escapes JSON needs; it
// parses back to the same shape, and the hash is the SHA-256 of it.
func TestPlanShapeCanonical(t *testing.T) {
	s := shapeWith(StepShape{Target: `"Quoted"."Mixed Case"`, Via: "tenant column tenant_id\n\u2028<&>\x01"})
	got := string(s.Canonical())
	require.Equal(t, `{"deleters":[{"fingerprint":"","name":"redis:sessions","planner":false,"steps":[]},`+
		`{"fingerprint":"fp1","name":"postgres:app","planner":true,"steps":[{"target":"\"Quoted\".\"Mixed Case\"","via":"tenant column tenant_id\n`+"\u2028<&>"+`\u0001"}]}]}`, got)
	var back PlanShape
	require.NoError(t, json.Unmarshal([]byte(got), &back))
	require.Equal(t, s, back)
	sum := sha256.Sum256([]byte(got))
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), s.Hash())
	_, err := ParsePlanShape(s.Hash(), []byte(got))
	require.NoError(t, err)
	_, err = ParsePlanShape(s.Hash(), []byte(`{"deleters":[]}`))
	require.ErrorContains(t, err, "changed after it was stored")
}

// TestPlanHashIgnoresCountsAndOrderOfConfig: counts, notes, the tenant and
// the config order of deleters do not change the hash; a step, a via, a
// fingerprint, a deleter or the ability to plan do.
func TestPlanHashIgnoresCountsAndOrderOfConfig(t *testing.T) {
	plan := func(expected int64, order []string, mut func(*DeleterPlan)) string {
		byName := map[string]DeleterPlan{
			"postgres:app": {Name: "postgres:app", Outcome: PlanPlanned, Fingerprint: "fp", Notes: []string{"n"},
				Steps: []PlanStep{{Target: "public.lines", Via: "FK lines.order_id -> orders", Expected: expected}, {Target: "public.orders", Via: "tenant column tenant_id", Expected: 2 * expected}}},
			"redis:sessions": {Name: "redis:sessions", Outcome: PlanUnsupported},
		}
		p := &Plan{TenantID: "t"}
		for _, n := range order {
			d := byName[n]
			if mut != nil && n == "postgres:app" {
				mut(&d)
			}
			p.Deleters = append(p.Deleters, d)
		}
		return shapeOf(p).hash()
	}
	base := plan(3, []string{"postgres:app", "redis:sessions"}, nil)
	require.Equal(t, base, plan(3000, []string{"redis:sessions", "postgres:app"}, func(d *DeleterPlan) { d.Notes = nil }))
	for name, mut := range map[string]func(*DeleterPlan){
		"new step": func(d *DeleterPlan) {
			d.Steps = append(d.Steps, PlanStep{Target: "public.invoices", Via: "tenant column tenant_id"})
		},
		"other via":       func(d *DeleterPlan) { d.Steps[0].Via = "FK lines.order_ref -> orders" },
		"other order":     func(d *DeleterPlan) { d.Steps[0], d.Steps[1] = d.Steps[1], d.Steps[0] },
		"fingerprint":     func(d *DeleterPlan) { d.Fingerprint = "fp2" },
		"cannot plan now": func(d *DeleterPlan) { *d = DeleterPlan{Name: d.Name, Outcome: PlanUnsupported} },
	} {
		require.NotEqual(t, base, plan(3, []string{"postgres:app", "redis:sessions"}, mut), name)
	}
	require.NotEqual(t, base, plan(3, []string{"postgres:app"}, nil), "a deleter removed")
}

func TestDescribeDrift(t *testing.T) {
	was := shapeWith(StepShape{Target: "public.lines", Via: "FK lines.order_id -> orders"}, StepShape{Target: "public.orders", Via: "tenant column tenant_id"})
	now := shapeWith(StepShape{Target: "public.lines", Via: "FK lines.order_ref -> orders"}, StepShape{Target: "public.invoices", Via: "tenant column tenant_id"})
	now.Deleters[1].Fingerprint = "fp2"
	now.Deleters = append(now.Deleters, DeleterShape{Name: "dynamodb:audit", Planner: true, Fingerprint: "x"})
	require.Equal(t, []string{
		"postgres:app: target public.lines is now reached via FK lines.order_ref -> orders (was via FK lines.order_id -> orders)",
		"postgres:app: new target public.invoices (via tenant column tenant_id)",
		"postgres:app: target public.orders is gone (was via tenant column tenant_id)",
		"postgres:app: fingerprint fp1 is now fp2 (the schema or config it plans from changed)",
		"deleter dynamodb:audit is new (configured since the plan was approved)",
	}, DescribeDrift(was, now))
	require.Equal(t, []string{"deleter postgres:app is no longer configured"},
		DescribeDrift(was, PlanShape{Deleters: was.Deleters[:1]}))
	swapped := shapeWith(StepShape{Target: "public.orders", Via: "tenant column tenant_id"}, StepShape{Target: "public.lines", Via: "FK lines.order_id -> orders"})
	require.Equal(t, []string{"postgres:app: the steps are in another order"}, DescribeDrift(was, swapped))
	require.Empty(t, DescribeDrift(was, was))
}
