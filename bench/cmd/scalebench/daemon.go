package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
)

// daemon is ./bin/lifecycled on a PostgreSQL database of its own, with the
// Kafka source and the stores' deleters.
type daemon struct {
	*benchkit.Daemon
	DSN  string
	drop func()
	db   *pgxpool.Pool
}

func startDaemon(broker string, st *stores, maxJobs int) *daemon {
	ctx := context.Background()
	d := &daemon{}
	d.DSN, d.drop = benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_scalebench")
	// The scheduled passes are off (a pass soon after start would archive
	// the first fill); the archive pass of the run is asked for.
	rest := fmt.Sprintf(`[archive]
enabled = false
[[dlq_source]]
name = "kafka"
plugin = "kafka"
[dlq_source.config]
brokers = [%q]
group_id = "scalebench"
topic_pattern = "*.dlq.v1"
`, broker)
	if st != nil {
		rest += st.deleters()
	}
	d.Daemon = benchkit.StartDaemon(benchkit.DaemonConfig{
		DirPrefix: "scaleb", State: d.DSN, ReceiptKey: true,
		Deletion: fmt.Sprintf("max_jobs = %d\npoll_interval = \"200ms\"\n", maxJobs),
		Rest:     rest,
		Timeout:  time.Hour, ReadyTries: 1200,
	})
	var err error
	d.db, err = pgxpool.New(ctx, d.DSN)
	benchkit.Must(err, "connect to the state store")
	return d
}

func (d *daemon) stop() {
	d.db.Close()
	d.Stop()
	d.drop()
}

// count runs a query of one bigint.
func (d *daemon) count(q string, args ...any) int64 {
	var n int64
	benchkit.Must(d.db.QueryRow(context.Background(), q, args...).Scan(&n), q)
	return n
}

// stored is how many dead letters are live, from the counters intake
// keeps in its transaction.
func (d *daemon) stored() int64 {
	return d.count(`SELECT COALESCE(sum(n), 0)::bigint FROM dlq.dlq_topic_counts`)
}

// unindexed is how many messages wait for the search indexer.
func (d *daemon) unindexed() int64 { return d.count(`SELECT count(*) FROM dlq.dlq_search_pending`) }

// waitIndexed waits until the search indexer has indexed every message.
func (d *daemon) waitIndexed() {
	for d.unindexed() > 0 {
		time.Sleep(200 * time.Millisecond)
	}
}

// analyze gives the planner fresh statistics, as autovacuum would after so
// many inserts.
func (d *daemon) analyze() {
	for _, t := range []string{"dlq.dlq_messages", "dlq.dlq_search_text"} {
		_, err := d.db.Exec(context.Background(), `ANALYZE `+t)
		benchkit.Must(err, "analyze")
	}
}

// size is the state store's database size in bytes.
func (d *daemon) size() int64 { return d.count(`SELECT pg_database_size(current_database())`) }

// relSize is a table's size with its indexes and TOAST, in bytes.
func (d *daemon) relSize(table string) int64 {
	return d.count(`SELECT pg_total_relation_size($1::regclass)`, table)
}

// rss is the resident set of the daemon and its plugin processes now, and
// the daemon's peak.
func (d *daemon) rss() string {
	pid := d.Cmd.Process.Pid
	total := benchkit.ProcStatus(pid, "VmRSS")
	for _, c := range children(pid) {
		total += max(benchkit.ProcStatus(c, "VmRSS"), 0)
	}
	return fmt.Sprintf("daemon %d MB (peak %d MB), with its plugins %d MB",
		benchkit.ProcStatus(pid, "VmRSS")/1024, benchkit.ProcStatus(pid, "VmHWM")/1024, total/1024)
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// the last ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
