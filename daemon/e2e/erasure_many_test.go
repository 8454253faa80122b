package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestThousandTenantsFromAFileWithMaxJobsAcrossTwoDaemons: 1,000 tenants
// with data in PostgreSQL, Redis and DynamoDB are queued from a file in one
// CLI call; two daemons share one PostgreSQL state store with max_jobs = 4.
// Every job completes, verified and with a receipt, both daemons take
// part, a bystander keeps everything, and a trigger in the state store,
// which counts RUNNING jobs whenever a job changes status, never sees more
// than 4.
func TestThousandTenantsFromAFileWithMaxJobsAcrossTwoDaemons(t *testing.T) {
	t.Parallel()
	const tenants, maxJobs = 1000, 4
	s := newStores(t, false)
	ids := make([]string, tenants)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range ids {
		ids[i] = uuid.NewString()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.seed(t, ids[i], 2)
		}()
	}
	wg.Wait()
	bystander := uuid.NewString()
	seedB := s.seed(t, bystander, 40)
	sumB := s.pgChecksum(t, bystander)

	state := testsvc.PGDatabase(t)
	extra := strings.Replace(s.deleters(), "[deletion]\n", fmt.Sprintf("[deletion]\nmax_jobs = %d\n", maxJobs), 1)
	d1 := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra})
	d2 := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra})
	for _, d := range []*testsvc.Daemon{d1, d2} {
		testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
	}
	ctx := testsvc.Context(t, 13*time.Minute)
	sp, err := pgxpool.New(ctx, state)
	require.NoError(t, err)
	t.Cleanup(sp.Close)
	_, err = sp.Exec(ctx, `
		CREATE TABLE public.running_seen (at timestamptz NOT NULL DEFAULT clock_timestamp(), n bigint NOT NULL);
		CREATE FUNCTION public.count_running() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO public.running_seen (n) SELECT count(*) FROM lifecycle.deletion_jobs WHERE status = 'RUNNING';
			RETURN NULL;
		END $$;
		CREATE TRIGGER count_running AFTER INSERT OR UPDATE OF status ON lifecycle.deletion_jobs
			FOR EACH STATEMENT EXECUTE FUNCTION public.count_running();`)
	require.NoError(t, err)

	list := "# tenants leaving on 2026-11-01\n\n" + strings.Join(ids, "\n") + "\n"
	file := filepath.Join(t.TempDir(), "tenants.txt")
	require.NoError(t, os.WriteFile(file, []byte(list), 0o600))
	started := time.Now()
	out, errOut, code := d1.CLI("tenant", "delete", "--from", file, "--yes")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, fmt.Sprintf("%d tenants listed: %d queued", tenants, tenants))

	// About 85 s on a 2-vCPU machine. (It once took 8 to 11 minutes: four
	// jobs at once deadlocked the postgres deleter's connection pool until
	// their Deletes timed out; the kit's concurrency check holds that now.)
	testsvc.Eventually(t, 5*time.Minute, func() bool {
		var done int
		require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM lifecycle.deletion_jobs WHERE status = 'COMPLETED' AND verified`).Scan(&done))
		return done == tenants
	}, "every job completes")
	t.Logf("%d tenants erased from three stores in %s", tenants, time.Since(started).Round(time.Second))

	var most, samples int64
	require.NoError(t, sp.QueryRow(ctx, `SELECT max(n), count(*) FROM public.running_seen`).Scan(&most, &samples))
	t.Logf("RUNNING jobs seen at %d status changes: at most %d", samples, most)
	require.Greater(t, samples, int64(2*tenants), "every claim and finish was seen")
	require.LessOrEqual(t, most, int64(maxJobs), "never more than max_jobs RUNNING across both daemons")
	require.GreaterOrEqual(t, most, int64(2), "jobs ran side by side")

	var receipts, other int
	require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM lifecycle.deletion_receipts`).Scan(&receipts))
	require.Equal(t, tenants, receipts, "a receipt for every job")
	require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM lifecycle.deletion_jobs WHERE status <> 'COMPLETED'`).Scan(&other))
	require.Zero(t, other)
	for _, d := range []*testsvc.Daemon{d1, d2} {
		require.Contains(t, d.Logs(), "deletion attempt finished", "both daemons took part")
	}

	var pgLeft int64
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM workflow_steps WHERE tenant_id = ANY($1)) +
		(SELECT count(*) FROM workflow_instances WHERE tenant_id = ANY($1)) +
		(SELECT count(*) FROM workflow_definitions WHERE tenant_id = ANY($1))`, ids).Scan(&pgLeft))
	require.Zero(t, pgLeft)
	keys, err := s.rc.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, seedB.redis, keys, "only the bystander's keys are left")
	scan, err := s.dc.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("audit_logs"), Select: "COUNT", ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.EqualValues(t, seedB.dynamo, scan.Count, "only the bystander's items are left")
	require.Equal(t, seedB, s.remaining(t, bystander))
	require.Equal(t, sumB, s.pgChecksum(t, bystander))

	out, _, code = d2.CLI("tenant", "jobs", "--status", "COMPLETED", "--all", "--format", "json")
	require.Equal(t, 0, code)
	require.Equal(t, tenants, strings.Count(out, `"status": "COMPLETED"`), "the job list pages through every job")
}
