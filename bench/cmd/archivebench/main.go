// Command archivebench measures one retention pass of the daemon over 1M
// eligible dead letters in PostgreSQL (plus younger and PENDING rows that
// must stay): rows archived per second and the longest single batch, which
// must stay under a second so no transaction holds its locks for long. The
// PostgreSQL procedure dlq.archive_old_dlq_messages is timed on the same
// data as the baseline.
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
)

func main() {
	rows := flag.Int("rows", 1_000_000, "eligible rows")
	batch := flag.Int("batch", 1000, "[archive] batch_size")
	flag.Parse()
	benchkit.Header(fmt.Sprintf("retention: archive pass over %d eligible rows, batch_size %d", *rows, *batch))
	ctx := context.Background()
	dsn, drop := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_archbench")
	defer drop()

	// The daemon migrates the database; the rows are then loaded directly.
	d := benchkit.StartDaemon(benchkit.DaemonConfig{
		DirPrefix: "archb", State: dsn, ReceiptKey: true,
		Rest: fmt.Sprintf(`[archive]
interval = "24h"
batch_size = %d
`, *batch),
		Timeout: time.Hour, ReadyTries: 601,
	})
	defer d.Stop()
	api := d.API

	pool, err := pgxpool.New(ctx, dsn)
	benchkit.Must(err, "connect")
	defer pool.Close()
	load := func() {
		_, err := pool.Exec(ctx, `TRUNCATE dlq.dlq_messages, dlq.dlq_messages_archive, dlq.dlq_topic_counts`)
		benchkit.Must(err, "truncate")
		// Rows come with a failure group, as intake stores them: without one
		// the daemon's group backfill updated them beside the baseline's CALL
		// and the two deadlocked.
		_, err = pool.Exec(ctx, `
			INSERT INTO dlq.dlq_messages (id, original_topic, error_message, retry_count, max_retries, payload, status,
				created_at, updated_at, source, dlq_topic, source_position, position_display, headers, raw_payload, failure_group)
			SELECT gen_random_uuid(), 'orders.events.v1', 'java.lang.IllegalStateException: payment provider timeout', 0, 3,
				jsonb_build_object('order_id', g), CASE WHEN g % 2 = 0 THEN 'RESOLVED' ELSE 'DEAD' END,
				now() - interval '60 days', now() - interval '40 days' + (g % 1000) * interval '1 second',
				'kafka', 'orders.dlq.v1', int4send(g % 3) || int8send(g), 'p' || g % 3 || '@' || g, '\x5b5d',
				convert_to('{"order_id":' || g || '}', 'UTF8'), 'archbench0000001'
			FROM generate_series(1, $1) g`, *rows)
		benchkit.Must(err, "load eligible rows")
		// Rows that must stay: younger than the retention, and still pending.
		_, err = pool.Exec(ctx, `
			INSERT INTO dlq.dlq_messages (id, original_topic, error_message, payload, status, created_at, updated_at,
				source, dlq_topic, source_position, position_display, failure_group)
			SELECT gen_random_uuid(), 'orders.events.v1', 'e', '{}', CASE WHEN g % 2 = 0 THEN 'RESOLVED' ELSE 'PENDING' END,
				now() - interval '90 days', CASE WHEN g % 2 = 0 THEN now() - interval '10 days' ELSE now() - interval '90 days' END,
				'kafka', 'orders.dlq.v1', int4send(9) || int8send(g), 'p9@' || g, 'archbench0000002'
			FROM generate_series(1, 20000) g`)
		benchkit.Must(err, "load rows that stay")
		_, err = pool.Exec(ctx, `INSERT INTO dlq.dlq_topic_counts SELECT dlq_topic, original_topic, status, count(*)
			FROM dlq.dlq_messages GROUP BY 1, 2, 3`)
		benchkit.Must(err, "counts")
		_, err = pool.Exec(ctx, `VACUUM ANALYZE dlq.dlq_messages`)
		benchkit.Must(err, "vacuum")
	}
	count := func(q string) int64 {
		var n int64
		benchkit.Must(pool.QueryRow(ctx, q).Scan(&n), q)
		return n
	}

	// Baseline: the procedure a DBA can CALL, on the same data.
	load()
	proc := benchkit.Time(func() {
		_, err := pool.Exec(ctx, fmt.Sprintf("CALL dlq.archive_old_dlq_messages(30, %d)", *batch))
		benchkit.Must(err, "CALL procedure")
	})
	procMoved := count(`SELECT count(*) FROM dlq.dlq_messages_archive`)

	load()
	res, err := api.RunArchive(ctx, false)
	benchkit.Must(err, "archive run")
	live := count(`SELECT count(*) FROM dlq.dlq_messages`)
	archived := count(`SELECT count(*) FROM dlq.dlq_messages_archive`)
	if res.Archived != int64(*rows) || archived != int64(*rows) || live != 20000 {
		benchkit.Must(fmt.Errorf("archived %d (table %d), %d left live", res.Archived, archived, live), "invariant")
	}
	took := time.Duration(res.TookSeconds * float64(time.Second))
	longest := time.Duration(res.LongestBatchSeconds * float64(time.Second))
	benchkit.Report("baseline: CALL dlq.archive_old_dlq_messages", "%v (%s), %d rows", proc.Round(time.Millisecond), benchkit.Rate(procMoved, proc), procMoved)
	benchkit.Report("daemon retention pass (archive/run)", "%v (%s), %d rows in %d batches", took.Round(time.Millisecond), benchkit.Rate(res.Archived, took), res.Archived, res.Batches)
	verdict := "meets"
	if longest >= time.Second {
		verdict = "MISSES"
	}
	benchkit.Report("longest batch (target < 1s)", "%v %s", longest.Round(time.Millisecond), verdict)
	benchkit.Report("rows that must stay", "%d live (younger or PENDING), untouched", live)
}
