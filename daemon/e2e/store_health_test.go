package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Each plugin's store taken down under a running daemon (PostgreSQL,
// MariaDB, Redis, dynalite, the Kafka broker, a RabbitMQ vhost), one at a
// time, with the plugin processes left running: /readyz answers 503 naming
// the plugin and the store's error, `lifecycled status` exits 3 with the
// same line, systemd's STATUS= says it, lifecycled_plugin_store_up is 0;
// brought back, all of it clears. A store is never reported up without a
// probe that found it so.
func TestAStoreDownUnderARunningDaemonShowsEverywhere(t *testing.T) {
	t.Parallel()
	ctx := testsvc.Context(t, 5*time.Minute)

	// PostgreSQL: its own database, closed to connections to take it down.
	pgDSN := testsvc.PGDatabase(t)
	pg, err := pgxpool.New(ctx, pgDSN)
	require.NoError(t, err)
	_, err = pg.Exec(ctx, seed001.WorkflowSchema("uuid"))
	require.NoError(t, err)
	pg.Close()
	pgName := regexp.MustCompile(`/([^/?]+)(\?|$)`).FindStringSubmatch(pgDSN)[1]
	admin, err := pgxpool.New(ctx, testsvc.PGAdminDSN())
	require.NoError(t, err)
	t.Cleanup(admin.Close)

	// MariaDB: a user of its own, locked to take it down.
	dbName, _ := testsvc.MySQLDatabase(t)
	myDSN := testsvc.MySQLUser(t, dbName, "store-health")
	my := testsvc.MySQLAdmin(t)
	_, err = my.ExecContext(ctx, fmt.Sprintf("CREATE TABLE `%s`.customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id))", dbName))
	require.NoError(t, err)
	myUser := regexp.MustCompile(`^([^:]+):`).FindStringSubmatch(myDSN)[1]

	rd := testsvc.Redis(t)
	dyn := testsvc.NewDynalite(t)
	dynTable := func() {
		dc := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(dyn.Endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		require.NoError(t, seed001.CreateAuditLogTable(ctx, dc, "audit_logs"))
	}
	dynTable()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1")
	mq := testsvc.NewRabbitMQ(t)
	rabbitTopology(t, mq, nil)

	dir := testsvc.ShortTempDir(t)
	notify, next := notifyListener(t, dir)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Dir: dir, Env: []string{"NOTIFY_SOCKET=" + notify},
		Plugins: "health_interval = \"1s\"\nhealth_timeout = \"2s\"\n", Extra: postgresBlock("postgres:workflows", pgDSN, "workflow_steps", "workflow_instances", "workflow_definitions") +
			redisBlock(rd.Addr, "session:{tenant}:*") + dynamoBlock("dynamodb:audit_logs", "audit_logs", dyn.Endpoint) + fmt.Sprintf(`
[[deleter]]
name = "mysql:customers"
plugin = "mysql"
[deleter.config]
dsn = %q
tables = ["customers"]
`, myDSN) + kafkaSource(k.Addr) + rabbitSource(mq.URL)})
	require.Contains(t, next("READY=1"), "STATUS=ready; 6/6 plugins running")

	storeOf := func(name string) wire.StoreHealth {
		var s wire.Status
		apitest.Expect(t, d, 200, &s).Status(t.Context())
		for _, p := range s.Plugins {
			if p.Name == name {
				return p.Store
			}
		}
		t.Fatalf("no plugin %s in the status", name)
		return wire.StoreHealth{}
	}
	testsvc.Eventually(t, 30*time.Second, func() bool {
		for _, n := range []string{"postgres:workflows", "redis:sessions", "dynamodb:audit_logs", "mysql:customers", "kafka", "rabbitmq:orders"} {
			if storeOf(n).State != "up" {
				return false
			}
		}
		return true
	}, "every store probed up")

	for _, c := range []struct {
		plugin     string
		down, back func()
	}{
		{"postgres:workflows", func() {
			_, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q WITH ALLOW_CONNECTIONS false`, pgName))
			require.NoError(t, err)
			_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, pgName)
			require.NoError(t, err)
		}, func() {
			_, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q WITH ALLOW_CONNECTIONS true`, pgName))
			require.NoError(t, err)
		}},
		{"mysql:customers", func() {
			_, err := my.ExecContext(ctx, fmt.Sprintf("ALTER USER '%s'@'%%' ACCOUNT LOCK", myUser))
			require.NoError(t, err)
			rows, err := my.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", myUser)
			require.NoError(t, err)
			var ids []int64
			for rows.Next() {
				var id int64
				require.NoError(t, rows.Scan(&id))
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				_, _ = my.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
			}
		}, func() {
			_, err := my.ExecContext(ctx, fmt.Sprintf("ALTER USER '%s'@'%%' ACCOUNT UNLOCK", myUser))
			require.NoError(t, err)
		}},
		{"redis:sessions", rd.Stop, rd.Start},
		{"dynamodb:audit_logs", dyn.Stop, func() { dyn.Start(); dynTable() }},
		{"kafka", k.Stop, k.Start},
		{"rabbitmq:orders", func() { mq.Ctl("clear_permissions", "-p", mq.VHost, "guest") },
			func() { mq.Ctl("set_permissions", "-p", mq.VHost, "guest", ".*", ".*", ".*") }},
	} {
		t.Run(c.plugin, func(t *testing.T) {
			var restored sync.Once
			back := func() { restored.Do(c.back) }
			t.Cleanup(back) // the next store's case starts with this one up
			c.down()
			var ready apitest.Answer
			testsvc.Eventually(t, 30*time.Second, func() bool {
				apitest.Record(d, &ready).Readyz(t.Context(), true)
				return ready.Code == 503 && strings.Contains(string(ready.Body), `"plugin:`+c.plugin+`"`)
			}, "/readyz 503 naming %s (%s)", c.plugin, ready.Body)
			var health wire.Health
			require.NoError(t, json.Unmarshal(ready.Body, &health))
			for _, ch := range health.Checks {
				if ch.Name == "plugin:"+c.plugin {
					require.Equal(t, "failing", ch.Status)
					require.Contains(t, ch.Error, "store down since ")
				} else if strings.HasPrefix(ch.Name, "plugin:") {
					require.Equal(t, "ok", ch.Status, "only %s is down: %+v", c.plugin, ch)
				}
			}
			store := storeOf(c.plugin)
			require.Equal(t, "down", store.State)
			require.NotEmpty(t, store.Error)
			require.NotNil(t, store.Since)

			out, errOut, code := d.CLI("status")
			require.Equal(t, 3, code, "%s", out)
			require.Regexp(t, regexp.QuoteMeta(c.plugin)+` +[a-z_]+ +running +DOWN since `, out)
			require.Contains(t, errOut, "plugin "+c.plugin+": store down since")
			require.Contains(t, next(c.plugin+": store down since"), "STATUS=degraded; 6/6 plugins running")
			require.Regexp(t, `lifecycled_plugin_store_up\{kind="[a-z_]+",plugin="`+regexp.QuoteMeta(c.plugin)+`"\} 0`, metrics(t, d))

			back()
			testsvc.Eventually(t, 60*time.Second, func() bool {
				var a apitest.Answer
				apitest.Record(d, &a).Readyz(t.Context(), false)
				return a.Code == 200
			}, "ready again once %s is back", c.plugin)
			require.Equal(t, "up", storeOf(c.plugin).State)
			require.Regexp(t, `lifecycled_plugin_store_up\{kind="[a-z_]+",plugin="`+regexp.QuoteMeta(c.plugin)+`"\} 1`, metrics(t, d))
			_, _, code = d.CLI("status")
			require.Equal(t, 0, code)
			next("STATUS=ready; 6/6 plugins running")
		})
	}
}
