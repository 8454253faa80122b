package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// bulkAtRate measures a bulk retry limited to rate messages/s over n dead
// letters of their own topic: the rate it keeps (from the operation's own
// start and finish) and the daemon's RSS while it runs, sampled every
// 200 ms, against its RSS just before.
func bulkAtRate(d *daemon, kc *kgo.Client, n int, rate float64) {
	produceTo(kc, "payments.dlq.v1", "payments.events.v1", n)
	ctx := context.Background()
	for {
		body, err := d.API.ListMessages(ctx, "payments.dlq.v1", url.Values{"page_size": {"1"}})
		benchkit.Must(err, "list")
		if body.Pagination.TotalCount >= int64(n) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := benchkit.ProcStatus(d.Cmd.Process.Pid, "VmRSS")
	filter, err := json.Marshal(wire.OperationFilter{Topic: new("payments.dlq.v1"), Status: []string{"PENDING"}})
	benchkit.Must(err, "filter")
	var code int
	op, err := d.API.StartOperation(ctx, wire.OperationRequest{Action: "retry", Filter: filter, Rate: &rate}, adminclient.Status(&code))
	benchkit.Must(err, "start bulk retry")
	if code != http.StatusAccepted {
		benchkit.Must(fmt.Errorf("status %d", code), "start bulk retry")
	}
	var peak int64
	for op.State == "RUNNING" {
		time.Sleep(200 * time.Millisecond)
		if rss := benchkit.ProcStatus(d.Cmd.Process.Pid, "VmRSS"); rss > peak {
			peak = rss
		}
		op, err = d.API.Operation(ctx, op.ID)
		benchkit.Must(err, "read bulk retry")
	}
	if op.State != "COMPLETED" || op.Succeeded != int64(n) {
		benchkit.Must(fmt.Errorf("%s with %d of %d retried", op.State, op.Succeeded, n), "bulk retry at a rate")
	}
	started, err := time.Parse(time.RFC3339Nano, *op.StartedAt)
	benchkit.Must(err, "started_at")
	finished, err := time.Parse(time.RFC3339Nano, *op.FinishedAt)
	benchkit.Must(err, "finished_at")
	took := finished.Sub(started)
	kept := float64(n) / took.Seconds()
	off := (kept - rate) / rate * 100
	benchkit.Report(fmt.Sprintf("bulk retry of %d at rate = %.0f", n, rate), "%v: %.0f msgs/s, %+.1f%% of the rate %s (target within 5%%)",
		took.Round(time.Millisecond), kept, off, verdict(off <= 5 && off >= -5))
	benchkit.Report("daemon RSS during the rate-limited bulk retry", "peak %d MiB vs %d MiB before", peak/1024, before/1024)
}

// produceTo writes n dead letters to topic, failed on original.
func produceTo(kc *kgo.Client, topic, original string, n int) {
	benchkit.Produce(kc, 0, n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("payment-%d", i)),
			Value: []byte(fmt.Sprintf(`{"payment_id":%d,"amount":990}`, i)),
			Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte(original)},
				{Key: "kafka_dlt-exception-message", Value: []byte("java.net.SocketTimeoutException: connect timed out")},
			}}
	})
}
