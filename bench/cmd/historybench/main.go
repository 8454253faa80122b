// Command historybench measures what the dead-letter history (issue 13,
// item 5) costs on PostgreSQL, baselines in the same run on the same data:
//
//   - recording retry outcomes, the statement FinishDLQ runs (100 messages
//     per statement, 4 at once, as retry-all does), with the trigger that
//     writes each new attempt_log entry into dlq.dlq_events enabled, against
//     the same statements with that trigger disabled; rounds alternate so
//     that neither side gets the warmer cache;
//   - reading one message's history (its intake row and its events) with
//     the events of every message in the table: p50/p99.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the migrations

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/migrations"
)

func main() {
	perRound := flag.Int("n", 25_000, "messages per round")
	rounds := flag.Int("rounds", 6, "rounds, alternating trigger off and on (even)")
	reads := flag.Int("reads", 2000, "history reads")
	flag.Parse()
	benchkit.Header(fmt.Sprintf("dead-letter history: retry outcomes of %d messages with and without the events trigger, %d history reads", *rounds**perRound, *reads))
	ctx := context.Background()
	dsn, drop := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_histbench")
	defer drop()
	db, err := sql.Open("pgx", dsn)
	benchkit.Must(err, "open")
	_, err = migrations.Up(migrations.Postgres, db)
	benchkit.Must(err, "migrate")
	db.Close()
	pool, err := pgxpool.New(ctx, dsn)
	benchkit.Must(err, "pool")
	defer pool.Close()

	var ids [][]uuid.UUID
	for r := 0; r < *rounds; r++ {
		ids = append(ids, load(ctx, pool, fmt.Sprintf("bench%d.dlq.v1", r), *perRound))
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE dlq.dlq_messages")
	benchkit.Must(err, "vacuum")

	var off, on time.Duration
	for r := 0; r < *rounds; r++ {
		trigger := r%2 == 1
		state := "DISABLE"
		if trigger {
			state = "ENABLE"
		}
		_, err := pool.Exec(ctx, "ALTER TABLE dlq.dlq_messages "+state+" TRIGGER trg_dlq_attempt_events")
		benchkit.Must(err, "toggle trigger")
		d := benchkit.Time(func() { finish(ctx, pool, ids[r]) })
		if trigger {
			on += d
		} else {
			off += d
		}
		benchkit.Report(fmt.Sprintf("round %d, trigger %s", r+1, map[bool]string{true: "on", false: "off"}[trigger]), "%s in %s",
			benchkit.Rate(int64(len(ids[r])), d), d.Round(time.Millisecond))
	}
	var events int64
	benchkit.Must(pool.QueryRow(ctx, "SELECT count(*) FROM dlq.dlq_events").Scan(&events), "count events")
	n := int64(*rounds / 2 * *perRound)
	benchkit.Report("outcomes, events trigger off (baseline)", "%s", benchkit.Rate(n, off))
	benchkit.Report("outcomes, events trigger on", "%s (%d events written)", benchkit.Rate(n, on), events)
	benchkit.Report("ratio on/off (time)", "%.2fx", float64(on)/float64(off))

	lat := make([]time.Duration, *reads)
	for i := range lat {
		r := ids[rand.IntN(len(ids))]
		id := r[rand.IntN(len(r))]
		start := time.Now()
		readHistory(ctx, pool, id)
		lat[i] = time.Since(start)
	}
	lat = benchkit.Sort(lat)
	benchkit.Report(fmt.Sprintf("history read (%d events in the table)", events), "p50 %s, p99 %s",
		benchkit.Percentile(lat, 50).Round(time.Microsecond), benchkit.Percentile(lat, 99).Round(time.Microsecond))
}

// load inserts n PENDING dead letters of a DLQ topic, as intake stores them.
func load(ctx context.Context, pool *pgxpool.Pool, topic string, n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO dlq.dlq_messages (id, original_topic, error_message, status, created_at, updated_at, source, dlq_topic,
			source_partition, source_offset, raw_payload, headers, attempt_log)
		SELECT u.id, 'orders.events.v1', 'java.lang.IllegalStateException: order 42 not found', 'RETRYING', now(), now(),
			'kafka', $2, 0, u.n, convert_to('{"order":' || u.n || '}', 'UTF8'), '\x5b5d', '[]'
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)`, ids, topic)
	benchkit.Must(err, "load")
	return ids
}

// finish records a "resolved" outcome for every message, 100 per statement,
// 4 statements at once: the write of FinishDLQ on PostgreSQL.
func finish(ctx context.Context, pool *pgxpool.Pool, ids []uuid.UUID) {
	type row struct {
		UID         uuid.UUID       `json:"uid"`
		Status      string          `json:"to_status"`
		Count       int             `json:"to_count"`
		Republished time.Time       `json:"republished"`
		Attempts    json.RawMessage `json:"attempts"`
	}
	pages := make(chan []uuid.UUID)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for page := range pages {
				now := time.Now().UTC()
				entry, _ := json.Marshal([]map[string]any{{"at": now, "outcome": "resolved", "trigger": "retry_all"}})
				rows := make([]row, len(page))
				for i, id := range page {
					rows[i] = row{UID: id, Status: "RESOLVED", Republished: now, Attempts: entry}
				}
				b, _ := json.Marshal(rows)
				_, err := pool.Exec(ctx, `
					UPDATE dlq.dlq_messages SET status = u.to_status, retry_count = u.to_count,
						republished_at = COALESCE(u.republished, republished_at),
						attempt_log = COALESCE(u.attempts, attempt_log), lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
					FROM jsonb_to_recordset($1::jsonb) AS u(uid uuid, to_status text, to_count int, republished timestamptz, attempts jsonb)
					WHERE id = u.uid`, string(b), now)
				benchkit.Must(err, "finish")
			}
		}()
	}
	for i := 0; i < len(ids); i += 100 {
		pages <- ids[i:min(i+100, len(ids))]
	}
	close(pages)
	wg.Wait()
}

// readHistory runs the two statements of DLQHistory.
func readHistory(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) {
	var (
		created          time.Time
		source, topic    string
		part             int32
		offset           int64
		original, errMsg string
		archived         bool
	)
	benchkit.Must(pool.QueryRow(ctx, `
		SELECT created_at, source, dlq_topic, source_partition, source_offset, original_topic, error_message, false
		FROM dlq.dlq_messages WHERE id = $1
		UNION ALL
		SELECT created_at, source, dlq_topic, source_partition, source_offset, original_topic, error_message, true
		FROM dlq.dlq_messages_archive WHERE id = $1
		LIMIT 1`, id).Scan(&created, &source, &topic, &part, &offset, &original, &errMsg, &archived), "read intake")
	rows, err := pool.Query(ctx, `SELECT at, kind, detail::text, uid FROM dlq.dlq_events WHERE message_id = $1 ORDER BY at, kind <> 'intake', id`, id)
	benchkit.Must(err, "read events")
	for rows.Next() {
	}
	benchkit.Must(rows.Err(), "read events")
	rows.Close()
}
