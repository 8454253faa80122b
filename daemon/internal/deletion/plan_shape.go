package deletion

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/jcs"
)

// PlanShape is what a plan's hash covers: per deleter its name, whether it
// planned, its fingerprint and its steps' targets and vias, in order. Not
// the counts (a job approved for 10 rows still runs when there are 12), not
// the notes, not the tenant: the same schema and config give the same
// shape for every tenant, and any change in what would be deleted, or
// how, gives another.
type PlanShape struct {
	Deleters []DeleterShape `json:"deleters"`
}

// DeleterShape is one deleter's part of a PlanShape.
type DeleterShape struct {
	Name string `json:"name"`
	// Planner is false for a deleter that cannot plan (unsupported).
	Planner     bool        `json:"planner"`
	Fingerprint string      `json:"fingerprint"`
	Steps       []StepShape `json:"steps"`
}

// StepShape is a step without its count.
type StepShape struct {
	Target string `json:"target"`
	Via    string `json:"via"`
}

// PlanHashPrefix starts every plan hash.
const PlanHashPrefix = "sha256:"

// shapeOf is the shape of a complete plan, deleters by name (config order
// says nothing about what is deleted).
func shapeOf(p *Plan) PlanShape {
	s := PlanShape{Deleters: make([]DeleterShape, 0, len(p.Deleters))}
	for _, d := range p.Deleters {
		s.Deleters = append(s.Deleters, d.shape())
	}
	sort.Slice(s.Deleters, func(i, j int) bool { return s.Deleters[i].Name < s.Deleters[j].Name })
	return s
}

func (d DeleterPlan) shape() DeleterShape {
	ds := DeleterShape{Name: d.Name, Planner: d.Outcome == PlanPlanned, Steps: []StepShape{}}
	if ds.Planner {
		ds.Fingerprint = d.Fingerprint
		for _, st := range d.Steps {
			ds.Steps = append(ds.Steps, StepShape{Target: st.Target, Via: st.Via})
		}
	}
	return ds
}

// Shape returns the shape of a complete plan; ok is false when a deleter
// FAILED.
func (p *Plan) Shape() (PlanShape, bool) {
	if !p.Complete() {
		return PlanShape{}, false
	}
	return shapeOf(p), true
}

// Canonical is the shape in RFC 8785 (JSON Canonicalization Scheme) form:
// members in code-point order, no whitespace, strings escaped only where
// JSON requires it. The shape holds only strings, booleans, arrays and
// objects, so that is all this encoder has to get right.
func (s PlanShape) Canonical() []byte {
	var b strings.Builder
	b.WriteString(`{"deleters":[`)
	for i, d := range s.Deleters {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fingerprint":`)
		writeJCSString(&b, d.Fingerprint)
		b.WriteString(`,"name":`)
		writeJCSString(&b, d.Name)
		fmt.Fprintf(&b, `,"planner":%t,"steps":[`, d.Planner)
		for j, st := range d.Steps {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"target":`)
			writeJCSString(&b, st.Target)
			b.WriteString(`,"via":`)
			writeJCSString(&b, st.Via)
			b.WriteByte('}')
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// writeJCSString writes s as RFC 8785 does; invalid UTF-8 (the SDK sends
// valid UTF-8) becomes one U+FFFD a run.
func writeJCSString(b *strings.Builder, s string) {
	jcs.WriteString(b, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// hash is "sha256:" and the hex SHA-256 of the canonical form.
func (s PlanShape) hash() string {
	sum := sha256.Sum256(s.Canonical())
	return PlanHashPrefix + hex.EncodeToString(sum[:])
}

// Hash returns the shape's plan hash.
func (s PlanShape) Hash() string { return s.hash() }

// ParsePlanShape reads a stored shape and checks it against its hash, so
// that a store row changed by hand is not taken for the approved plan.
func ParsePlanShape(hash string, body []byte) (PlanShape, error) {
	var s PlanShape
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("stored plan %s: %w", hash, err)
	}
	if got := s.hash(); got != hash {
		return s, fmt.Errorf("stored plan %s hashes to %s: it was changed after it was stored", hash, got)
	}
	return s, nil
}

// DescribeDrift names what differs between the approved shape and the
// current one, deleter by deleter and step by step, for an operator to read.
func DescribeDrift(approved, current PlanShape) []string {
	var out []string
	was := map[string]DeleterShape{}
	for _, d := range approved.Deleters {
		was[d.Name] = d
	}
	now := map[string]DeleterShape{}
	for _, d := range current.Deleters {
		now[d.Name] = d
		old, ok := was[d.Name]
		if !ok {
			out = append(out, fmt.Sprintf("deleter %s is new (configured since the plan was approved)", d.Name))
			continue
		}
		out = append(out, describeDeleterDrift(old, d)...)
	}
	for _, d := range approved.Deleters {
		if _, ok := now[d.Name]; !ok {
			out = append(out, fmt.Sprintf("deleter %s is no longer configured", d.Name))
		}
	}
	return out
}

func describeDeleterDrift(old, cur DeleterShape) []string {
	var out []string
	switch {
	case old.Planner && !cur.Planner:
		return []string{fmt.Sprintf("%s: its plugin can no longer plan", cur.Name)}
	case !old.Planner && cur.Planner:
		return []string{fmt.Sprintf("%s: its plugin can plan now (it could not when the plan was approved)", cur.Name)}
	}
	oldVia := map[string]string{}
	for _, s := range old.Steps {
		oldVia[s.Target] = s.Via
	}
	curVia := map[string]string{}
	for _, s := range cur.Steps {
		curVia[s.Target] = s.Via
		via, ok := oldVia[s.Target]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: new target %s (via %s)", cur.Name, s.Target, s.Via))
		case via != s.Via:
			out = append(out, fmt.Sprintf("%s: target %s is now reached via %s (was via %s)", cur.Name, s.Target, s.Via, via))
		}
	}
	for _, s := range old.Steps {
		if _, ok := curVia[s.Target]; !ok {
			out = append(out, fmt.Sprintf("%s: target %s is gone (was via %s)", cur.Name, s.Target, s.Via))
		}
	}
	if len(out) == 0 && !sameOrder(old.Steps, cur.Steps) {
		out = append(out, fmt.Sprintf("%s: the steps are in another order", cur.Name))
	}
	if old.Fingerprint != cur.Fingerprint {
		out = append(out, fmt.Sprintf("%s: fingerprint %s is now %s (the schema or config it plans from changed)", cur.Name, old.Fingerprint, cur.Fingerprint))
	}
	return out
}

func sameOrder(a, b []StepShape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
