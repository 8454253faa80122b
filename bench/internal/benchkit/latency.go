package benchkit

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
)

// Call is one admin API call of a latency scenario, with the options the
// measurement passes (the raw answer).
type Call func(...adminclient.Option) error

// Latency makes calls of c through ex and reports their p50 and p99 (each
// the exchange, Exchange.Took) against target on a line named name, with
// the first answer's page size and total when it is a page of messages
// (a search's total, or the list route's pagination total_count).
func Latency(ex *Exchange, name string, c Call, target time.Duration, calls int) {
	lat := make([]time.Duration, calls)
	var body struct {
		Messages   []json.RawMessage `json:"messages"`
		Total      int64             `json:"total"`
		Estimate   bool              `json:"total_is_estimate"`
		Pagination *struct {
			TotalCount int64 `json:"total_count"`
		} `json:"pagination"`
	}
	for i := range lat {
		var b []byte
		Must(c(adminclient.Raw(&b)), name)
		lat[i] = ex.Took
		if i == 0 {
			_ = json.Unmarshal(b, &body)
		}
	}
	Sort(lat)
	p99 := Percentile(lat, 99)
	if body.Pagination != nil {
		body.Total = body.Pagination.TotalCount
	}
	extra := ""
	if body.Messages != nil {
		est := ""
		if body.Estimate {
			est = " (estimate)"
		}
		extra = fmt.Sprintf(", %d on the page, total %d%s", len(body.Messages), body.Total, est)
	}
	Report(name, "p50 %v / p99 %v %s (target p99 <= %v)%s", Percentile(lat, 50).Round(10*time.Microsecond),
		p99.Round(10*time.Microsecond), verdict(p99 <= target), target, extra)
}
