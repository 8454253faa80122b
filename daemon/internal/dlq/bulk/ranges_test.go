package bulk

import (
	"testing"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

func TestUndone(t *testing.T) {
	items := func(from, to int64) []dlq.OperationItem {
		var out []dlq.OperationItem
		for s := from; s <= to; s++ {
			out = append(out, dlq.OperationItem{Seq: s})
		}
		return out
	}
	done := []dlq.SeqRange{{After: 5, Upto: 8}, {After: 12, Upto: 20}}
	cases := []struct {
		name      string
		items     []dlq.OperationItem
		wantFirst int64
		wantLen   int
		wantNext  int64
	}{
		{name: "nothing done among them", items: items(1, 5), wantFirst: 1, wantLen: 5, wantNext: 5},
		{name: "cut where a done range begins", items: items(1, 10), wantFirst: 1, wantLen: 5, wantNext: 5},
		{name: "begins in a done range", items: items(6, 10), wantLen: 0, wantNext: 8},
		{name: "between two done ranges", items: items(9, 15), wantFirst: 9, wantLen: 4, wantNext: 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page, next := undone(c.items, done)
			if len(page) != c.wantLen || next != c.wantNext || (len(page) > 0 && page[0].Seq != c.wantFirst) {
				t.Fatalf("undone(%d..%d) = %d items from %v, next %d; want %d from %d, next %d", c.items[0].Seq, c.items[len(c.items)-1].Seq,
					len(page), page, next, c.wantLen, c.wantFirst, c.wantNext)
			}
		})
	}
}
