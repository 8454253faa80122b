package console

import (
	"fmt"
	"html/template"
	"strings"
)

// sparkline draws arrivals per hour (oldest first) as a small bar chart in
// inline SVG, rendered here rather than by a charting library: "since
// when, how fast, still growing?" at a glance. Bars scale to the busiest
// hour; each has a title with its count, and the whole an accessible label.
func sparkline(perHour []int64) template.HTML {
	if len(perHour) == 0 {
		return ""
	}
	const width, height, gap = 96, 20, 1
	var most, total int64
	for _, n := range perHour {
		most, total = max(most, n), total+n
	}
	bar := float64(width)/float64(len(perHour)) - gap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%d in the last %d hours, per hour">`,
		width, height, width, height, total, len(perHour))
	for i, n := range perHour {
		h := 0.0
		if most > 0 && n > 0 {
			h = max(1, float64(height)*float64(n)/float64(most))
		}
		x := float64(i) * (bar + gap)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%d</title></rect>`, x, float64(height)-h, bar, h, n)
	}
	// The axis, so that 24 quiet hours before a burst read as such.
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"></line>`, height-1, width, height-1)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers only
}
