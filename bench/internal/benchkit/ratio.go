package benchkit

import "time"

// Ratio prints a hot path against its floor or raw baseline measured in
// the same run (issue 32's form): each side's median and spread over its
// runs, the target, and last on the line "ratio to <to> N.NNx", the median
// over the median, so that reports can be compared by their last field.
// It returns the ratio.
func Ratio(name, to string, runs, base []time.Duration, target float64) float64 {
	r, b := Sort(append([]time.Duration(nil), runs...)), Sort(append([]time.Duration(nil), base...))
	ratio := median(r).Seconds() / median(b).Seconds()
	Report(name, "%d runs: median %v (%v-%v), %s %v (%v-%v); target <= %.2fx %s; ratio to %s %.2fx",
		len(r), round(median(r)), round(r[0]), round(r[len(r)-1]), to, round(median(b)), round(b[0]), round(b[len(b)-1]),
		target, verdict(ratio <= target), to, ratio)
	return ratio
}

// median of sorted durations (the lower middle of an even count).
func median(sorted []time.Duration) time.Duration { return sorted[(len(sorted)-1)/2] }

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}
