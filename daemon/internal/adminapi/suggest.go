package adminapi

import (
	"sort"
	"strings"
)

// closeMatches returns the candidates within a few edits of name (typos:
// "order.dlq.v1" for "orders.dlq.v1"), closest first, at most three.
func closeMatches(name string, candidates []string) []string {
	type scored struct {
		s string
		d int
	}
	limit := max(2, len(name)/4)
	var out []scored
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d <= limit {
			out = append(out, scored{c, d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	var names []string
	for i := 0; i < len(out) && i < 3; i++ {
		names = append(names, out[i].s)
	}
	return names
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
