package main

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// floorRounds measures intake and retry-all against their floors in the
// form issue 32 asks for: rounds of the same n messages, each on a fresh
// daemon and database (a consumer group of its own reads the topic from
// the start), each followed by PostgreSQL alone writing the same rows;
// then the medians and spreads, and the ratios to the floors. The
// guarantees included: intake stores each message (search index queued,
// failure group counted) before its offset is committed; retry-all
// republishes each with acks=all and records its outcome, history and
// counters.
func floorRounds(addr string, n, rounds int) {
	ctx := context.Background()
	var intakes, inserts, retries, updates []time.Duration
	for i := 0; i < rounds; i++ {
		d := &daemon{benchkit.StartKafkaDaemon("lcd_dlqbench", "dlqb", addr, fmt.Sprintf("group_id = \"dlqbench-round-%d\"\n", i))}
		intake, _ := d.waitStored(n)
		d.waitIndexed()
		var res wire.RetryAllResult
		retry := benchkit.Time(func() {
			var err error
			res, err = d.API.RetryAll(ctx, "orders.dlq.v1", false)
			benchkit.Must(err, "retry-all")
		})
		if res.Retried != n {
			benchkit.Must(fmt.Errorf("retried %d of %d", res.Retried, n), "retry-all")
		}
		fl := storeFloor(d, n)
		d.stop()
		benchkit.Report(fmt.Sprintf("round %d of %d", i+1, rounds), "intake %v, floor %v; retry-all %v, floor %v",
			intake.Round(time.Millisecond), fl.insert.Round(time.Millisecond), retry.Round(time.Millisecond), fl.updateTriggered.Round(time.Millisecond))
		intakes, inserts = append(intakes, intake), append(inserts, fl.insert)
		retries, updates = append(retries, retry), append(updates, fl.updateTriggered)
	}
	benchkit.Ratio(fmt.Sprintf("intake %d against PostgreSQL inserting the rows alone", n), "floor", intakes, inserts, 1.3)
	benchkit.Ratio(fmt.Sprintf("retry-all %d (acks=all) against PostgreSQL updating them with the table's triggers", n), "floor", retries, updates, 1.2)
}
