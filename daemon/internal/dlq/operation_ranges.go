package dlq

import (
	"cmp"
	"fmt"
	"slices"
)

// SeqRange is a run of an operation's items, those numbered after After
// up to Upto. A bulk retry records each page when its broker answered, not
// in order, so an operation keeps the ranges recorded beyond its position
// (the end of the run of items done from the first): a resumed run skips
// them, and a page is never counted twice.
type SeqRange struct {
	After int64 `json:"after"`
	Upto  int64 `json:"upto"`
}

// RecordRange adds r to an operation's position and the ranges done
// beyond it, and returns them: the position moves over every range that
// now follows it. It fails when r is empty or overlaps what is done: the
// page was recorded already (by this run, or by a daemon that held the
// operation before).
func RecordRange(position int64, done []SeqRange, r SeqRange) (int64, []SeqRange, error) {
	if r.Upto <= r.After {
		return position, done, fmt.Errorf("empty range of items (%d, %d]", r.After, r.Upto)
	}
	if r.After < position {
		return position, done, fmt.Errorf("items (%d, %d] overlap the %d done from the first", r.After, r.Upto, position)
	}
	for _, d := range done {
		if r.After < d.Upto && d.After < r.Upto {
			return position, done, fmt.Errorf("items (%d, %d] overlap items (%d, %d] done already", r.After, r.Upto, d.After, d.Upto)
		}
	}
	out := append(slices.Clone(done), r)
	slices.SortFunc(out, func(a, b SeqRange) int { return cmp.Compare(a.After, b.After) })
	merged := out[:0]
	for _, d := range out {
		switch {
		case d.After == position:
			position = d.Upto
		case len(merged) > 0 && merged[len(merged)-1].Upto == d.After:
			merged[len(merged)-1].Upto = d.Upto
		default:
			merged = append(merged, d)
		}
	}
	if len(merged) == 0 {
		return position, nil, nil
	}
	return position, merged, nil
}
