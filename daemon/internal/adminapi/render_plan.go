package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func planBody(p *deletion.Plan) wire.Plan {
	out := wire.Plan{TenantID: p.TenantID, Complete: p.Complete(), Deleters: make([]wire.DeleterPlan, 0, len(p.Deleters))}
	if p.Hash != "" {
		h := p.Hash
		out.PlanHash = &h
	}
	for _, d := range p.Deleters {
		dj := wire.DeleterPlan{Name: d.Name, Status: d.Outcome, Steps: []wire.PlanStep{}, Notes: []string{}, Error: d.Error}
		if d.Outcome == deletion.PlanPlanned {
			fp, n := d.Fingerprint, d.Expected()
			dj.Fingerprint, dj.Expected = &fp, &n
			out.ExpectedTotal += n
			dj.Notes = append(dj.Notes, d.Notes...)
			for _, s := range d.Steps {
				dj.Steps = append(dj.Steps, wire.PlanStep{Target: s.Target, Via: s.Via, Expected: s.Expected})
			}
		}
		out.Deleters = append(out.Deleters, dj)
	}
	return out
}
