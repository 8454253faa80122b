package deletion

// settle brings a deleter's deleted counts up to date from a count taken
// now: what is gone is what there was before the first attempt minus what
// is left. That stays exact when an earlier attempt died before it could
// report its last batch, and it holds per table or key pattern as it does
// for the whole deleter. Deleted counts never go down: data written after
// the first count (a writer still running) makes the difference smaller,
// not what was deleted.
func (d *DeleterState) settle(count int64, breakdown map[string]int64) {
	if d.Total < 0 {
		d.Total = count + d.DeletedCount
	}
	d.DeletedCount = max(d.DeletedCount, d.Total-count)
	d.settleBreakdown(breakdown)
	d.agree()
}

// settleBreakdown is settle per key of the plugin's breakdown. A key seen
// for the first time gets its total from this count and what is already
// known to be deleted under it; a key missing from this count is left as it
// was rather than read as zero, so a deleter whose keys changed (a table
// dropped from its config) never claims to have deleted what it did not.
func (d *DeleterState) settleBreakdown(left map[string]int64) {
	if left == nil {
		return
	}
	if d.TotalBreakdown == nil {
		d.TotalBreakdown = map[string]int64{}
	}
	if d.DeletedBreakdown == nil {
		d.DeletedBreakdown = map[string]int64{}
	}
	for k, n := range left {
		if _, ok := d.TotalBreakdown[k]; !ok {
			d.TotalBreakdown[k] = n + d.DeletedBreakdown[k]
		}
		d.DeletedBreakdown[k] = max(d.DeletedBreakdown[k], d.TotalBreakdown[k]-n)
	}
}

// succeeded records a successful Delete on top of what earlier attempts
// had deleted (base). A plugin that reports no breakdown leaves the
// breakdown to the next count (the verification) to bring up to date.
func (d *DeleterState) succeeded(base int64, baseBreakdown map[string]int64, res Result) {
	d.DeletedCount = base + res.DeletedCount
	d.Proof = res.Proof
	if len(res.Breakdown) == 0 {
		return
	}
	d.DeletedBreakdown = copyBreakdown(baseBreakdown)
	for k, n := range res.Breakdown {
		d.DeletedBreakdown[k] += n
	}
	d.agree()
}

// agree keeps the deleted total and its breakdown one number: each is a
// reading of what went, and neither may say less than the other (a
// plugin's total that left out what a trigger removed, a breakdown a
// count brought up to date).
func (d *DeleterState) agree() {
	if len(d.DeletedBreakdown) > 0 {
		d.DeletedCount = max(d.DeletedCount, sum(d.DeletedBreakdown))
	}
}

// sum adds up a breakdown.
func sum(b map[string]int64) int64 {
	var n int64
	for _, v := range b {
		n += v
	}
	return n
}
