package dlq

import (
	"reflect"
	"testing"
)

func TestRecordRange(t *testing.T) {
	r := func(after, upto int64) SeqRange { return SeqRange{After: after, Upto: upto} }
	cases := []struct {
		name     string
		position int64
		done     []SeqRange
		add      SeqRange
		wantPos  int64
		wantDone []SeqRange
		wantErr  bool
	}{
		{name: "in order", position: 0, add: r(0, 250), wantPos: 250},
		{name: "ahead of the position", position: 250, add: r(500, 750), wantPos: 250, wantDone: []SeqRange{r(500, 750)}},
		{name: "fills the gap", position: 250, done: []SeqRange{r(500, 750)}, add: r(250, 500), wantPos: 750},
		{name: "fills the gap and joins two", position: 0, done: []SeqRange{r(250, 500), r(500, 750), r(1000, 1250)}, add: r(0, 250),
			wantPos: 750, wantDone: []SeqRange{r(1000, 1250)}},
		{name: "joins the one before", position: 0, done: []SeqRange{r(250, 500)}, add: r(500, 750),
			wantPos: 0, wantDone: []SeqRange{r(250, 750)}},
		{name: "joins the one after", position: 0, done: []SeqRange{r(500, 750)}, add: r(250, 500),
			wantPos: 0, wantDone: []SeqRange{r(250, 750)}},
		{name: "out of order, far apart", position: 0, done: []SeqRange{r(750, 1000)}, add: r(250, 500),
			wantPos: 0, wantDone: []SeqRange{r(250, 500), r(750, 1000)}},
		{name: "one item", position: 7, add: r(7, 8), wantPos: 8},
		{name: "recorded already: before the position", position: 500, add: r(250, 500), wantErr: true},
		{name: "recorded already: straddles the position", position: 500, add: r(400, 600), wantErr: true},
		{name: "recorded already: a done range", position: 0, done: []SeqRange{r(250, 500)}, add: r(250, 500), wantErr: true},
		{name: "overlaps a done range", position: 0, done: []SeqRange{r(250, 500)}, add: r(400, 600), wantErr: true},
		{name: "covers a done range", position: 0, done: []SeqRange{r(250, 500)}, add: r(100, 600), wantErr: true},
		{name: "empty", position: 0, add: r(5, 5), wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := append([]SeqRange(nil), c.done...)
			pos, done, err := RecordRange(c.position, c.done, c.add)
			if !reflect.DeepEqual(c.done, before) {
				t.Fatalf("the ranges given changed: %v, was %v", c.done, before)
			}
			if c.wantErr {
				if err == nil {
					t.Fatalf("RecordRange(%d, %v, %v) = %d, %v; want an error", c.position, c.done, c.add, pos, done)
				}
				if pos != c.position || !reflect.DeepEqual(done, c.done) {
					t.Fatalf("a refused range changed the position or the ranges: %d %v", pos, done)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pos != c.wantPos || !reflect.DeepEqual(done, c.wantDone) {
				t.Fatalf("RecordRange(%d, %v, %v) = %d, %v; want %d, %v", c.position, c.done, c.add, pos, done, c.wantPos, c.wantDone)
			}
		})
	}
}

// TestRecordRangeAnyOrder records the pages of a set in every order of a
// few shuffles: whatever the order, the position ends at the end of the
// set with nothing left beside it.
func TestRecordRangeAnyOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}, {1, 3, 0, 4, 2}, {3, 4, 1, 2, 0}}
	for _, order := range orders {
		var (
			pos  int64
			done []SeqRange
			err  error
		)
		for _, p := range order {
			if pos, done, err = RecordRange(pos, done, SeqRange{After: int64(p * 10), Upto: int64(p*10 + 10)}); err != nil {
				t.Fatalf("order %v: %v", order, err)
			}
		}
		if pos != 50 || done != nil {
			t.Fatalf("order %v: position %d, ranges %v; want 50 and none", order, pos, done)
		}
	}
}
