// Command scalebench is issue 32's scale run: how the daemon's costs grow
// with the size of what it holds, on the real daemon (./bin/lifecycled),
// its bundled plugins, an in-process Kafka broker (kfake) and PostgreSQL as
// the state store.
//
//   - Dead letters: the store is taken to each of -steps (1M, 5M, 10M) over
//     -topics DLQ topics. Most rows are written with SQL, copies of the
//     messages the Kafka intake stored, queued for the search indexer as
//     intake queues its own; the last -sample of each step come through
//     Kafka and the intake, and are timed. At each step: the intake rate,
//     how long the search indexer took to index the step's rows, the p50
//     and p99 of a topic's list page, the searches and the groups list, the
//     daemon's RSS (with its plugins) and the state store's size.
//   - Erasure: -tenants small tenants in every bundled deleter (PostgreSQL,
//     MySQL/MariaDB, Redis, DynamoDB through dynalite), erased in one bulk
//     request at the pace max_jobs allows, on the state store that holds
//     the dead letters: throughput per quarter of the run (it must not fall
//     as the ledger grows), the state store's growth per tenant, the
//     daemon's RSS, and a check that every erased tenant is gone from every
//     store and every other tenant is whole.
//   - Retention: one archive pass over the full store: rows moved per
//     second, the longest batch, RSS and the store's size after.
//
// Each path is reported per step so that its curve can be read; a cost
// that grows faster than the data is named in bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
)

func main() {
	steps := flag.String("steps", "1000000,5000000,10000000", "store sizes (dead letters) at which the paths are measured")
	topicCount := flag.Int("topics", 50, "DLQ topics")
	sample := flag.Int("sample", 100_000, "dead letters of each step that come through Kafka and the intake (timed)")
	calls := flag.Int("calls", 200, "calls per search scenario at each step")
	tenants := flag.Int("tenants", 10_000, "tenants erased (0: skip the erasure)")
	maxJobs := flag.Int("max-jobs", 8, "[deletion] max_jobs: the erasure's pace")
	deleters := flag.String("deleters", "postgres,mysql,redis,dynamodb", "bundled deleters the tenants live in")
	archive := flag.Bool("archive", true, "run the archive pass over the full store")
	flag.Parse()
	sizes := parseSteps(*steps)

	benchkit.Header(fmt.Sprintf("scale run: dead letters to %s over %d topics, %d tenants erased, archive pass", *steps, *topicCount, *tenants))
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
	benchkit.Must(err, "start kfake")
	defer broker.Close()
	addr := broker.ListenAddrs()[0]
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxBufferedRecords(200_000), kgo.ProducerBatchMaxBytes(1<<20))
	benchkit.Must(err, "kafka client")
	defer kc.Close()
	topics := make([]string, *topicCount)
	for i := range topics {
		topics[i] = fmt.Sprintf("svc%02d.dlq.v1", i)
	}
	_, err = kadm.NewClient(kc).CreateTopics(context.Background(), 3, 1, nil, topics...)
	benchkit.Must(err, "create topics")

	var st *stores
	if *tenants > 0 {
		st = startStores(strings.Split(*deleters, ","), *tenants)
		defer st.stop()
	}
	d := startDaemon(addr, st, *maxJobs)
	defer d.stop()

	dl := &deadLetters{d: d, kc: kc, topics: topics}
	dl.seed(min(20_000, *sample))
	for _, size := range sizes {
		dl.step(size, *sample, *calls)
	}
	if st != nil {
		eraseAll(d, st, *tenants)
	}
	if *archive {
		archivePass(d)
	}
}

func parseSteps(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		benchkit.Must(err, "-steps")
		if len(out) > 0 && n <= out[len(out)-1] {
			benchkit.Must(fmt.Errorf("%d after %d", n, out[len(out)-1]), "-steps must grow")
		}
		out = append(out, n)
	}
	return out
}

// archivePass runs one retention pass over the whole store.
func archivePass(d *daemon) {
	ctx := context.Background()
	eligible := d.count(`SELECT count(*) FROM dlq.dlq_messages WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < now() - interval '30 days'`)
	live := d.count(`SELECT count(*) FROM dlq.dlq_messages`)
	before := d.size()
	res, err := d.API.RunArchive(ctx, false)
	benchkit.Must(err, "archive run")
	took := time.Duration(res.TookSeconds * float64(time.Second))
	longest := time.Duration(res.LongestBatchSeconds * float64(time.Second))
	after := d.count(`SELECT count(*) FROM dlq.dlq_messages`)
	if res.Archived != eligible || after != live-eligible {
		benchkit.Must(fmt.Errorf("archived %d of %d eligible; %d live before, %d after", res.Archived, eligible, live, after), "archive invariant")
	}
	benchkit.Report(fmt.Sprintf("archive pass over %d dead letters", live), "%d moved in %v (%s), %d batches, longest %v %s (target < 1s)",
		res.Archived, took.Round(time.Millisecond), benchkit.Rate(res.Archived, took), res.Batches, longest.Round(time.Millisecond),
		verdict(longest < time.Second))
	benchkit.Report("  daemon RSS, state store", "%s; store %s before, %s after", d.rss(), mb(before), mb(d.size()))
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }
