package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
)

// failures are error texts as consumers write them ({n}: a part that
// changes per message), so that intake computes failure groups.
var failures = []struct{ class, text string }{
	{"org.springframework.dao.DuplicateKeyException", `ERROR: duplicate key value violates unique constraint "orders_pkey" DETAIL: Key (id)=({n}) already exists.`},
	{"", `dial tcp 10.0.3.{n}:5432: connect: connection refused`},
	{"", `POST https://carrier.example.com/v2/shipments/{n}/labels: HTTP 503 Service Unavailable`},
	{"com.fasterxml.jackson.databind.exc.InvalidFormatException", `Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "x{n}": not a valid Integer value`},
	{"", `charge invoice {n}: call payments: context deadline exceeded after 5.{n}s`},
	{"java.lang.NullPointerException", `Cannot invoke "com.acme.Customer.getId()" because "order.customer" is null`},
}

// fillChunk is how many rows one fill statement writes: a step's fill is
// several statements, as a day of intake is many transactions.
const fillChunk = 1_000_000

// deadLetters takes the store through the steps.
type deadLetters struct {
	d      *daemon
	kc     *kgo.Client
	topics []string
	// produced is how many records went through Kafka; filled how many
	// rows were written with SQL.
	produced, filled int
}

// seed takes n dead letters in through Kafka, untimed: the messages the
// SQL fill copies (their failure groups, headers, topics).
func (dl *deadLetters) seed(n int) {
	took := dl.intake(n)
	benchkit.Report(fmt.Sprintf("seed: %d through Kafka", n), "%v (%s)", took.Round(time.Millisecond), benchkit.Rate(int64(n), took))
}

// intake produces n records over the topics and returns the time from
// the first produced to the last stored.
func (dl *deadLetters) intake(n int) time.Duration {
	want := dl.d.stored() + int64(n)
	from := dl.produced
	start := time.Now()
	benchkit.Produce(dl.kc, from, from+n, dl.record)
	dl.produced += n
	for dl.d.stored() < want {
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// record i: Spring-style headers, a tenant header, a JSON payload.
func (dl *deadLetters) record(i int) *kgo.Record {
	f := failures[i%len(failures)]
	topic := dl.topics[i%len(dl.topics)]
	headers := []kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte(strings.TrimSuffix(topic, ".dlq.v1") + ".events.v1")},
		{Key: "kafka_dlt-exception-message", Value: []byte(strings.ReplaceAll(f.text, "{n}", fmt.Sprint(i)))},
		{Key: "tenant", Value: []byte(fmt.Sprintf("tenant-%05d", i%10_000))},
	}
	if f.class != "" {
		headers = append(headers, kgo.RecordHeader{Key: "kafka_dlt-exception-fqcn", Value: []byte(f.class)})
	}
	return &kgo.Record{
		Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i)), Headers: headers,
		Value: []byte(fmt.Sprintf(`{"order_id":"ORD-%08d","amount":%d,"currency":"EUR","note":"dead-lettered by the consumer"}`, i, i%10000)),
	}
}

// step takes the store to size and measures every path there.
func (dl *deadLetters) step(size, sample, calls int) {
	have := int(dl.d.stored())
	fmt.Printf("\n-- at %d dead letters\n", size)
	if fillN := size - sample - have; fillN > 0 {
		took := benchkit.Time(func() { dl.fill(fillN) })
		benchkit.Report(fmt.Sprintf("fill %d with SQL (copies, queued for the indexer)", fillN), "%v (%s), ANALYZE included",
			took.Round(time.Second), benchkit.Rate(int64(fillN), took))
		queued := dl.d.unindexed()
		index := benchkit.Time(dl.d.waitIndexed)
		benchkit.Report("  search indexer: the filled rows", "%d indexed in %v (%s)", queued, index.Round(time.Second), benchkit.Rate(queued, index))
	}
	at := dl.d.stored()
	took := dl.intake(sample)
	benchkit.Report(fmt.Sprintf("intake %d through Kafka at %d stored", sample, at), "%v (%s), first produced to last stored",
		took.Round(time.Millisecond), benchkit.Rate(int64(sample), took))
	lag := dl.d.unindexed()
	caught := benchkit.Time(dl.d.waitIndexed)
	benchkit.Report("  search indexer behind intake at its end", "%d; caught up in %v", lag, caught.Round(time.Millisecond))
	dl.d.analyze()
	dl.searches(calls)
	benchkit.Report("  daemon RSS (with its plugins), state store", "%s; store %s (dead letters %s)", dl.d.rss(), mb(dl.d.size()), mb(dl.d.relSize("dlq.dlq_messages")))
}

// fill writes n rows with SQL, copies of the messages intake stored: new
// positions, keys and payloads, every topic, created over the last 90
// days (so that about a third of them are old enough to archive), 60%
// PENDING, 20% RESOLVED, 20% DEAD; the counters (topics, groups,
// arrivals) are added to, and the rows queued for the search indexer.
func (dl *deadLetters) fill(n int) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dl.d.DSN)
	benchkit.Must(err, "connect to the state store")
	defer c.Close(ctx)
	exec := func(q string, args ...any) {
		_, err := c.Exec(ctx, q, args...)
		benchkit.Must(err, "fill: "+q[:min(70, len(q))])
	}
	// The messages intake stored before the first fill (the seed) are
	// the ones copied, at every step.
	exec(`CREATE TABLE IF NOT EXISTS public.bench_seed AS SELECT row_number() OVER (ORDER BY id) AS rn, original_topic, error_message,
		source, dlq_topic, headers, failure_group FROM dlq.dlq_messages`)
	for done := 0; done < n; {
		k := min(fillChunk, n-done)
		first := dl.filled + 1
		tx, err := c.Begin(ctx)
		benchkit.Must(err, "fill: begin")
		_, err = tx.Exec(ctx, `
			WITH ins AS (
				INSERT INTO dlq.dlq_messages (id, original_topic, error_message, retry_count, max_retries, status, created_at,
					updated_at, source, dlq_topic, source_position, position_display, message_key, headers, raw_payload, payload,
					content_digest, failure_group, attempt_log)
				SELECT gen_random_uuid(), s.original_topic, s.error_message, 0, 3,
					CASE WHEN g % 10 < 6 THEN 'PENDING' WHEN g % 10 < 8 THEN 'RESOLVED' ELSE 'DEAD' END,
					now() - ((g * 7919) % 7776000) * interval '1 second', now() - ((g * 7919) % 7776000) * interval '1 second',
					s.source, s.dlq_topic, int4send(9) || int8send(g), 'p9@' || g, convert_to('fill-' || g, 'UTF8'), s.headers,
					convert_to(format('{"order_id":"FIL-%s","amount":%s,"currency":"EUR","note":"dead-lettered by the consumer"}',
						lpad(g::text, 8, '0'), g % 10000), 'UTF8'),
					jsonb_build_object('order_id', 'FIL-' || lpad(g::text, 8, '0'), 'amount', g % 10000, 'currency', 'EUR',
						'note', 'dead-lettered by the consumer'),
					decode(md5('fill-' || g), 'hex'), s.failure_group, '[]'::jsonb
				FROM generate_series($1::bigint, $2::bigint) g JOIN public.bench_seed s ON s.rn = (g % (SELECT count(*) FROM public.bench_seed)) + 1
				RETURNING id, dlq_topic, original_topic, status, failure_group, created_at
			), arrived AS (
				INSERT INTO dlq.dlq_arrivals AS a (hour, dlq_topic, failure_group, n)
				SELECT to_timestamp(floor(extract(epoch FROM created_at) / 3600) * 3600), dlq_topic, failure_group, count(*)
				FROM ins GROUP BY 1, 2, 3
				ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = a.n + EXCLUDED.n
			), queued AS (
				INSERT INTO dlq.dlq_search_pending (id) SELECT id FROM ins
			), counted AS (
				INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
				SELECT dlq_topic, original_topic, status, count(*) FROM ins GROUP BY 1, 2, 3
				ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n
			)
			INSERT INTO dlq.dlq_group_counts AS c (group_id, dlq_topic, original_topic, status, n)
			SELECT failure_group, dlq_topic, original_topic, status, count(*) FROM ins GROUP BY 1, 2, 3, 4
			ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n`, first, first+k-1)
		benchkit.Must(err, "fill: insert")
		benchkit.Must(tx.Commit(ctx), "fill: commit")
		dl.filled += k
		done += k
	}
	exec(`UPDATE dlq.dlq_failure_groups g SET first_seen = LEAST(g.first_seen, now() - interval '90 days')`)
	exec(`ANALYZE dlq.dlq_messages`)
}

// searches measures the read paths an operator uses in an incident, each
// call timed as the exchange over the socket (benchkit.Exchange).
func (dl *deadLetters) searches(calls int) {
	ctx := context.Background()
	api := dl.d.API
	groups, err := api.Groups(ctx, nil)
	benchkit.Must(err, "groups")
	if len(groups.Groups) == 0 {
		benchkit.Must(fmt.Errorf("no groups"), "groups")
	}
	top := groups.Groups[0].ID
	since := time.Now().Add(-50 * time.Hour).UTC()
	window := url.Values{"since": {since.Format(time.RFC3339)}, "until": {since.Add(time.Hour).Format(time.RFC3339)}}
	topic, original := dl.topics[7], strings.TrimSuffix(dl.topics[7], ".dlq.v1")+".events.v1"
	type call func(...adminclient.Option) error
	search := func(q url.Values) call {
		return func(o ...adminclient.Option) error { _, err := api.Search(ctx, q, o...); return err }
	}
	measure := func(name string, c call, target time.Duration, calls int) {
		benchkit.Latency(dl.d.Exchange, "  "+name, benchkit.Call(c), target, calls)
	}
	measure("list page 1 (20) of a topic", func(o ...adminclient.Option) error {
		_, err := api.ListMessages(ctx, topic, url.Values{"page": {"1"}, "page_size": {"20"}}, o...)
		return err
	}, 10*time.Millisecond, calls)
	measure("search: topic+status", search(url.Values{"topic": {original}, "status": {"PENDING"}}), 20*time.Millisecond, calls)
	measure("search: group", search(url.Values{"group": {top}}), 20*time.Millisecond, calls)
	measure("search: key", search(url.Values{"key": {"key-4321"}}), 20*time.Millisecond, calls)
	measure("search: time range (1 h)", search(window), 20*time.Millisecond, calls)
	measure("search: q (selective: one order)", search(url.Values{"q": {"ORD-00004321"}}), 500*time.Millisecond, max(calls/5, 10))
	measure("search: error substring", search(url.Values{"error": {"connection refused"}}), 500*time.Millisecond, max(calls/5, 10))
	measure("groups list (sort=count)", func(o ...adminclient.Option) error { _, err := api.Groups(ctx, nil, o...); return err },
		50*time.Millisecond, calls)
	measure("topics (GET /api/v1/dlq)", func(o ...adminclient.Option) error { _, err := api.Topics(ctx, o...); return err },
		50*time.Millisecond, max(calls/5, 10))
}
