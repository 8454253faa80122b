// Command searchbench measures dead-letter search and failure groups
// (issue 13) with the real daemon (./bin/lifecycled), its Kafka plugin, an
// in-process Kafka broker (kfake) and PostgreSQL as the state store,
// baselines in the same run:
//
//   - intake of 100k dead letters over four DLQ topics with realistic,
//     varied errors (so every message gets a failure group computed), vs
//     `kcat -C -e` reading the same four topics to /dev/null;
//   - then the store is filled to 1M messages with SQL (copies of the
//     ingested ones, spread over a week and over statuses, as the seed's
//     benchmarks do it for speed), and over the admin socket: search first
//     page p50/p99 by topic+status, group, key and time range; payload text
//     search (q) p99; groups list p99; the seed's list page 1 of a topic as
//     the reference in the same run;
//   - the search indexer (it fills the text index off the intake path): how
//     far behind intake it was when intake ended and how long it took to
//     catch up, and how long it took to index the filled rows; the searches
//     are measured once it has.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

var topics = []string{"orders.dlq.v1", "payments.dlq.v1", "shipping.dlq.v1", "crm.dlq.v1"}

// failures are error texts as consumers write them, with their variable
// parts ({n}: a number that changes per message).
var failures = []struct{ class, text string }{
	{"org.springframework.dao.DuplicateKeyException", `ERROR: duplicate key value violates unique constraint "orders_pkey" DETAIL: Key (id)=({n}) already exists.`},
	{"", `dial tcp 10.0.3.{n}:5432: connect: connection refused`},
	{"", `POST https://carrier.example.com/v2/shipments/{n}/labels: HTTP 503 Service Unavailable (at 2026-11-26T10:08:20Z)`},
	{"com.fasterxml.jackson.databind.exc.InvalidFormatException", `Cannot deserialize value of type ` + "`java.lang.Integer`" + ` from String "x{n}": not a valid Integer value`},
	{"org.apache.kafka.connect.errors.DataException", `Struct schemas do not match. Schema mismatch for field "email": expected STRING, got INT32 at offset {n}`},
	{"", `charge invoice {n}: call payments: context deadline exceeded after 5.{n}s`},
	{"", `customer cus_J8k{n} not found in tenant 6f1c2a84-8a4e-4d7b-9a51-0e6f3b1f2c7d`},
	{"java.lang.NullPointerException", `Cannot invoke "com.acme.Customer.getId()" because "order.customer" is null`},
}

func main() {
	n := flag.Int("n", 100_000, "dead letters taken in through Kafka")
	total := flag.Int("total", 1_000_000, "messages in the store for the searches")
	calls := flag.Int("calls", 300, "calls per search scenario")
	keep := flag.Bool("keep", false, "keep the database at the end (its DSN is printed), to look at plans")
	flag.Parse()

	benchkit.Header(fmt.Sprintf("dead-letter search and failure groups: intake %d, searches at %d", *n, *total))
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
	benchkit.Must(err, "start kfake")
	defer broker.Close()
	addr := broker.ListenAddrs()[0]
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxBufferedRecords(200_000), kgo.ProducerBatchMaxBytes(1<<20))
	benchkit.Must(err, "kafka client")
	defer kc.Close()
	ctx := context.Background()
	_, err = kadm.NewClient(kc).CreateTopics(ctx, 3, 1, nil, topics...)
	benchkit.Must(err, "create topics")
	produce(kc, *n)

	kcatRead := benchkit.Time(func() {
		for _, t := range topics {
			cmd := exec.Command("sh", "-c", fmt.Sprintf("kcat -C -b %s -t %s -o beginning -e -q > /dev/null", addr, t))
			out, err := cmd.CombinedOutput()
			benchkit.Must(err, "kcat -C: "+string(out))
		}
	})
	d := startDaemon(addr)
	defer d.stop(*keep)
	intake := d.waitStored(*n)
	benchkit.Report("baseline: kcat -C -e > /dev/null (4 topics)", "%v (%s)", kcatRead.Round(time.Millisecond), benchkit.Rate(int64(*n), kcatRead))
	ratio := intake.Seconds() / kcatRead.Seconds()
	benchkit.Report(fmt.Sprintf("intake %d into PostgreSQL (groups computed, search indexes)", *n), "%v (%s); ratio to kcat %.2fx %s (target <= 2.5x)",
		intake.Round(time.Millisecond), benchkit.Rate(int64(*n), intake), ratio, verdict(ratio <= 2.5))
	// The search indexer runs beside intake; how far behind it was when
	// the last message was stored, and how long it took to catch up.
	lag := d.unindexed()
	drain := benchkit.Time(d.waitIndexed)
	benchkit.Report("search indexer behind intake at its end", "%d messages; caught up %v after intake ended (%s)",
		lag, drain.Round(time.Millisecond), benchkit.Rate(lag, drain))

	fill := benchkit.Time(func() { d.fill(*total - *n) })
	benchkit.Report(fmt.Sprintf("fill to %d with SQL, VACUUM ANALYZE", *total), "%v", fill.Round(time.Second))
	// The filled rows are queued for the indexer as intake queues its own.
	queued := d.unindexed()
	index := benchkit.Time(d.waitIndexed)
	benchkit.Report(fmt.Sprintf("search indexer: %d filled messages indexed", queued), "%v (%s)", index.Round(time.Second), benchkit.Rate(queued, index))
	d.analyze()

	groups, err := d.API.Groups(ctx, nil)
	benchkit.Must(err, "groups")
	if len(groups.Groups) == 0 {
		benchkit.Must(fmt.Errorf("no groups"), "groups")
	}
	top := groups.Groups[0].ID
	since := time.Now().Add(-50 * time.Hour).UTC()
	window := url.Values{"since": {since.Format(time.RFC3339)}, "until": {since.Add(time.Hour).Format(time.RFC3339)}}

	// Each scenario is a call of the API (the route and its query), timed
	// as the exchange: the request sent to the answer read
	// (benchkit.Exchange).
	type call func(...adminclient.Option) error
	list := func(topic string, q url.Values) call {
		return func(o ...adminclient.Option) error { _, err := d.API.ListMessages(ctx, topic, q, o...); return err }
	}
	search := func(q url.Values) call {
		return func(o ...adminclient.Option) error { _, err := d.API.Search(ctx, q, o...); return err }
	}
	groupsList := func(q url.Values) call {
		return func(o ...adminclient.Option) error { _, err := d.API.Groups(ctx, q, o...); return err }
	}
	measure := func(name string, c call, target time.Duration, calls int) {
		benchkit.Latency(d.Exchange, name, benchkit.Call(c), target, calls)
	}
	measure("baseline: seed list page 1 (20) of a topic", list("orders.dlq.v1", url.Values{"page": {"1"}, "page_size": {"20"}}), 10*time.Millisecond, *calls)
	measure("search first page: topic+status", search(url.Values{"topic": {"orders.events.v1"}, "status": {"PENDING"}}), 20*time.Millisecond, *calls)
	measure("search first page: topic+status, 2 statuses", search(url.Values{"topic": {"orders.dlq.v1"}, "status": {"PENDING,DEAD"}}), 20*time.Millisecond, *calls)
	measure("search first page: group", search(url.Values{"group": {top}}), 20*time.Millisecond, *calls)
	measure("search first page: key", search(url.Values{"key": {"key-543210"}}), 20*time.Millisecond, *calls)
	measure("search first page: time range (1 h)", search(window), 20*time.Millisecond, *calls)
	measure("search first page: q (selective: one order)", search(url.Values{"q": {"ORD-0654321"}}), 500*time.Millisecond, *calls/3)
	measure("search first page: q (broad: most payloads)", search(url.Values{"q": {"currency"}}), 500*time.Millisecond, *calls/3)
	measure("search first page: error substring", search(url.Values{"error": {"connection refused"}}), 500*time.Millisecond, *calls/3)
	// A bulk operation's dry run counts the same set its operation would
	// fix; the search of the same text is its baseline.
	dryRun := func(name, filter string, query url.Values, calls int) {
		lat := make([]time.Duration, calls)
		var body wire.OperationDryRun
		for i := range lat {
			res, err := d.API.PreviewOperation(ctx, wire.OperationRequest{Action: "retry", Filter: json.RawMessage(filter)})
			benchkit.Must(err, "dry run")
			lat[i] = d.Exchange.Took
			if i == 0 {
				body = res
			}
		}
		// The set is the search's live matches: the same count, or the
		// measurement is of a wrong answer.
		found, err := d.API.Search(ctx, query)
		benchkit.Must(err, "search "+query.Encode())
		if found.TotalIsEstimate || found.Total != body.Matched {
			benchkit.Must(fmt.Errorf("dry run matched %d, the search found %d (estimate: %v)", body.Matched, found.Total, found.TotalIsEstimate), name)
		}
		benchkit.Sort(lat)
		benchkit.Report(name, "p50 %v / p99 %v, matched %d (as the search)", benchkit.Percentile(lat, 50).Round(10*time.Microsecond),
			benchkit.Percentile(lat, 99).Round(10*time.Microsecond), body.Matched)
	}
	dryRun("bulk dry run: q (selective: one order)", `{"q":"ORD-0654321"}`, url.Values{"q": {"ORD-0654321"}}, *calls/3)
	dryRun("bulk dry run: q and topic (selective)", `{"q":"ORD-0654321","topic":"orders.events.v1"}`, url.Values{"q": {"ORD-0654321"}, "topic": {"orders.events.v1"}}, *calls/3)
	dryRun("bulk dry run: error substring (selective: one host)", `{"error":"10.0.3.17:5432"}`, url.Values{"error": {"10.0.3.17:5432"}}, *calls/3)
	measure("groups list (sort=count)", groupsList(nil), 50*time.Millisecond, *calls)
	measure("groups list (sort=recent, one topic)", groupsList(url.Values{"sort": {"recent"}, "topic": {"payments.dlq.v1"}}), 50*time.Millisecond, *calls)
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}

// produce writes n dead letters over the four topics, Spring-style headers,
// each failure's variable part different per message.
func produce(kc *kgo.Client, n int) {
	benchkit.Produce(kc, 0, n, func(i int) *kgo.Record {
		f := failures[i%len(failures)]
		topic := topics[i%len(topics)]
		headers := []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte(topic[:len(topic)-len(".dlq.v1")] + ".events.v1")},
			{Key: "kafka_dlt-exception-message", Value: []byte(strings.ReplaceAll(f.text, "{n}", fmt.Sprint(i)))},
			{Key: "tenant", Value: []byte(fmt.Sprintf("tenant-%d", i%50))},
		}
		if f.class != "" {
			headers = append(headers, kgo.RecordHeader{Key: "kafka_dlt-exception-fqcn", Value: []byte(f.class)})
		}
		return &kgo.Record{
			Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i)), Headers: headers,
			Value: []byte(fmt.Sprintf(`{"order_id":"ORD-%07d","amount":%d,"currency":"EUR","note":"dead-lettered by the consumer"}`, i, i%10000)),
		}
	})
}

// daemon is ./bin/lifecycled on a database of its own (DSN), which stop
// drops.
type daemon struct{ *benchkit.KafkaDaemon }

// fill adds n copies of the ingested messages with SQL: new positions,
// keys and payloads, created over the last week, 60% PENDING, 20%
// RESOLVED, 20% DEAD; the counters are rebuilt from the rows.
func (d *daemon) fill(n int) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, d.DSN)
	benchkit.Must(err, "connect to the state store")
	defer c.Close(ctx)
	for _, q := range []string{
		`CREATE TEMP TABLE seed AS SELECT row_number() OVER (ORDER BY id) AS rn, original_topic, error_message, source, dlq_topic,
			headers, failure_group FROM dlq.dlq_messages`,
		fmt.Sprintf(`INSERT INTO dlq.dlq_messages (id, original_topic, error_message, retry_count, max_retries, status, created_at,
			updated_at, source, dlq_topic, source_position, position_display, message_key, headers, raw_payload, content_digest,
			failure_group, attempt_log)
		SELECT gen_random_uuid(), s.original_topic, s.error_message, 0, 3,
			CASE WHEN g %% 10 < 6 THEN 'PENDING' WHEN g %% 10 < 8 THEN 'RESOLVED' ELSE 'DEAD' END,
			now() - (g::float8 / %d * interval '7 days'), now() - (g::float8 / %d * interval '7 days'),
			s.source, s.dlq_topic, int4send(9) || int8send(g), 'p9@' || g, convert_to('key-' || (g + 100000), 'UTF8'), s.headers,
			convert_to(format('{"order_id":"ORD-%%s","amount":%%s,"currency":"EUR","note":"dead-lettered by the consumer"}',
				lpad((g + 100000)::text, 7, '0'), g %% 10000), 'UTF8'),
			decode(md5('fill-' || g), 'hex'), s.failure_group, '[]'::jsonb
		FROM generate_series(1, %d) g JOIN seed s ON s.rn = (g %% (SELECT count(*) FROM seed)) + 1`, n, n, n),
		`TRUNCATE dlq.dlq_topic_counts, dlq.dlq_group_counts, dlq.dlq_arrivals`,
		`INSERT INTO dlq.dlq_arrivals SELECT to_timestamp(floor(extract(epoch FROM created_at) / 3600) * 3600), dlq_topic, failure_group, count(*)
			FROM dlq.dlq_messages WHERE created_at >= now() - interval '2 days' GROUP BY 1, 2, 3`,
		`INSERT INTO dlq.dlq_topic_counts SELECT dlq_topic, original_topic, status, count(*) FROM dlq.dlq_messages GROUP BY 1, 2, 3`,
		`INSERT INTO dlq.dlq_group_counts SELECT failure_group, dlq_topic, original_topic, status, count(*) FROM dlq.dlq_messages GROUP BY 1, 2, 3, 4`,
		`UPDATE dlq.dlq_failure_groups g SET first_seen = m.first FROM (SELECT failure_group, min(created_at) AS first
			FROM dlq.dlq_messages GROUP BY 1) m WHERE m.failure_group = g.id`,
		`DO $$ BEGIN IF to_regclass('dlq.dlq_search_pending') IS NOT NULL THEN
			INSERT INTO dlq.dlq_search_pending (id) SELECT id FROM dlq.dlq_messages WHERE position_display LIKE 'p9@%'; END IF; END $$`,
		`VACUUM ANALYZE dlq.dlq_messages`,
	} {
		_, err := c.Exec(ctx, q)
		benchkit.Must(err, "fill: "+q[:min(60, len(q))])
	}
}

// unindexed is how many messages wait for the search indexer.
func (d *daemon) unindexed() int64 {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, d.DSN)
	benchkit.Must(err, "connect to the state store")
	defer c.Close(ctx)
	// A build from before the search indexer (an A/B run) has no queue.
	var n int64
	benchkit.Must(c.QueryRow(ctx, `SELECT CASE WHEN to_regclass('dlq.dlq_search_pending') IS NULL THEN 0
		ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n FROM dlq.dlq_search_pending', false, true, '')))[1]::text::bigint END`).Scan(&n), "count unindexed")
	return n
}

// waitIndexed waits until the search indexer has indexed every message.
func (d *daemon) waitIndexed() {
	for d.unindexed() > 0 {
		time.Sleep(100 * time.Millisecond)
	}
}

// analyze gives the planner statistics of the search index, as autovacuum
// would after so many inserts.
func (d *daemon) analyze() {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, d.DSN)
	benchkit.Must(err, "connect to the state store")
	defer c.Close(ctx)
	var indexed bool
	benchkit.Must(c.QueryRow(ctx, `SELECT to_regclass('dlq.dlq_search_text') IS NOT NULL`).Scan(&indexed), "find the search index")
	if indexed {
		_, err = c.Exec(ctx, `VACUUM ANALYZE dlq.dlq_search_text, dlq.dlq_search_pending`)
		benchkit.Must(err, "analyze the search index")
	}
}

func startDaemon(broker string) *daemon {
	return &daemon{benchkit.StartKafkaDaemon("lcd_searchbench", "srchb", broker, `group_id = "searchbench"
topic_pattern = "*.dlq.v1"
`)}
}

// waitStored returns how long the daemon took to store n messages, from
// the moment the count first moved (the consumer group's join is not
// counted), as dlqbench measures it.
func (d *daemon) waitStored(n int) time.Duration {
	var start time.Time
	var base int64 = -1
	for {
		body, err := d.API.Search(context.Background(), url.Values{"limit": {"1"}})
		benchkit.Must(err, "count")
		got := body.Total
		if base < 0 {
			base = got
		}
		if got > base && start.IsZero() {
			start = time.Now()
			base = got
		}
		if got >= int64(n) {
			if start.IsZero() {
				start = time.Now()
			}
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) stop(keep bool) {
	d.Stop()
	if keep {
		fmt.Println("kept the state store:", d.DSN)
		return
	}
	d.Drop()
}
