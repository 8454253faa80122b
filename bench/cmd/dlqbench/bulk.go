package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
)

// bulkAtRate measures a bulk retry limited to rate messages/s over n dead
// letters of their own topic: the rate it keeps (from the operation's own
// start and finish) and the daemon's RSS while it runs, sampled every
// 200 ms, against its RSS just before.
func bulkAtRate(d *daemon, kc *kgo.Client, n int, rate float64) {
	produceTo(kc, "payments.dlq.v1", "payments.events.v1", n)
	for {
		var body struct {
			Pagination struct {
				TotalCount int `json:"total_count"`
			} `json:"pagination"`
		}
		benchkit.Must(json.Unmarshal(d.get("/api/v1/dlq/payments.dlq.v1?page_size=1"), &body), "list")
		if body.Pagination.TotalCount >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := benchkit.ProcStatus(d.cmd.Process.Pid, "VmRSS")
	req, _ := json.Marshal(map[string]any{"action": "retry", "filter": map[string]any{"topic": "payments.dlq.v1", "status": []string{"PENDING"}}, "rate": rate})
	var op struct {
		ID         string  `json:"id"`
		State      string  `json:"state"`
		Matched    int64   `json:"matched"`
		Done       int64   `json:"done"`
		Succeeded  int64   `json:"succeeded"`
		StartedAt  *string `json:"started_at"`
		FinishedAt *string `json:"finished_at"`
	}
	benchkit.Must(json.Unmarshal(d.postJSON("/api/v1/dlq/operations", req, 202), &op), "start bulk retry")
	var peak int64
	for op.State == "RUNNING" {
		time.Sleep(200 * time.Millisecond)
		if rss := benchkit.ProcStatus(d.cmd.Process.Pid, "VmRSS"); rss > peak {
			peak = rss
		}
		benchkit.Must(json.Unmarshal(d.get("/api/v1/dlq/operations/"+op.ID), &op), "read bulk retry")
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
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		wg.Add(1)
		kc.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("payment-%d", i)),
			Value: []byte(fmt.Sprintf(`{"payment_id":%d,"amount":990}`, i)),
			Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte(original)},
				{Key: "kafka_dlt-exception-message", Value: []byte("java.net.SocketTimeoutException: connect timed out")},
			}}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	benchkit.Must(firstErr, "produce")
}

func (d *daemon) postJSON(path string, body []byte, want int) []byte {
	resp, err := d.http.Post("http://localhost"+path, "application/json", bytes.NewReader(body))
	benchkit.Must(err, "POST "+path)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		benchkit.Must(fmt.Errorf("%d %s", resp.StatusCode, b), "POST "+path)
	}
	return b
}
