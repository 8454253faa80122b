#!/usr/bin/env bash
# An end-to-end demo on real servers: a PostgreSQL database, a redis-server,
# dynalite and a Kafka broker (kfake), a daemon with all four plugins; erase a
# tenant and replay a dead letter. Everything lives in a temp dir and stops
# on exit. Run `make demo` (it builds and installs what is needed first);
# `make demo DEMO_UI=1` then stores a dead-letter storm and serves the web
# console (`lifecycled ui`) until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
# PostgreSQL is a throwaway cluster of its own (make demo runs this under
# scripts/test-pg.sh, which sets LIFECYCLED_TEST_PG and removes the cluster
# after): the machine's own is neither needed nor touched.
if [ -z "${LIFECYCLED_TEST_PG:-}" ]; then
  exec "$(dirname "$0")/test-pg.sh" "$0" "$@"
fi
work=$(mktemp -d /tmp/lcd-demo.XXXX)
pids=()
db="lcd_demo_$$"
pg_admin=$LIFECYCLED_TEST_PG
pg_port=$(sed -E 's#.*:([0-9]+)/.*#\1#' <<<"$pg_admin")
psql_admin() { psql "$pg_admin" "$@"; }
psql_demo() { psql "postgres://postgres@127.0.0.1:$pg_port/$db?sslmode=disable" "$@"; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  psql_admin -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# A signal ends the script through its EXIT trap, so the servers and the
# database go with it (Ctrl-C while the console is served, or a kill).
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting PostgreSQL database, Redis, dynalite and a Kafka broker"
psql_admin -qc "CREATE DATABASE $db"
psql_demo -q <<'SQL'
CREATE TABLE workflow_definitions (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, name text);
CREATE TABLE workflow_instances (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, definition_id bigint NOT NULL REFERENCES workflow_definitions (id));
CREATE TABLE workflow_steps (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, instance_id bigint NOT NULL REFERENCES workflow_instances (id));
CREATE INDEX ON workflow_definitions (tenant_id); CREATE INDEX ON workflow_instances (tenant_id);
CREATE INDEX ON workflow_instances (definition_id); CREATE INDEX ON workflow_steps (tenant_id); CREATE INDEX ON workflow_steps (instance_id);
SQL
rport=$(free_port); redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null & pids+=($!)
dport=$(free_port); node test/dynalite/node_modules/dynalite/cli.js --port "$dport" --host 127.0.0.1 --createTableMs 0 >/dev/null & pids+=($!)
# Built, not `go run`: killing `go run` would leave the broker it started behind.
go build -o "$work/kfake" ./internal/cmd/kfake
kport=$(free_port); "$work/kfake" -port "$kport" >/dev/null 2>&1 & pids+=($!)
sleep 3

tenant=8a1f4c2e-5b7d-4e0a-9c3f-2d6e8b1a4f70
other=3c9e7a1b-2f4d-4b6e-8a0c-5d1f3e7b9a26
for t in $tenant $other; do
  psql_demo -q -c "
    WITH d AS (INSERT INTO workflow_definitions (tenant_id, name) SELECT '$t', 'd' FROM generate_series(1, 10) RETURNING id),
         i AS (INSERT INTO workflow_instances (tenant_id, definition_id) SELECT '$t', (SELECT min(id) FROM d) FROM generate_series(1, 100) RETURNING id)
    INSERT INTO workflow_steps (tenant_id, instance_id) SELECT '$t', id FROM i, generate_series(1, 5)"
  for i in $(seq 1 50); do echo "SET session:$t:$i x"; echo "SET csrf:$t:$i y"; done | redis-cli -p "$rport" >/dev/null
done
AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo go run ./scripts/demo-dynamo -endpoint "http://127.0.0.1:$dport" -tenants "$tenant,$other" -items 40

cat > "$work/config.toml" <<TOML
version = 1
[daemon]
state = "sqlite://$work/state.db"
plugin_dir = "$PWD/bin"
[admin]
listen = "unix://$work/admin.sock"
[retry]
enabled = false
[deletion]
poll_interval = "200ms"
[[deleter]]
name = "postgres:workflows"
plugin = "postgres"
[deleter.config]
dsn = "postgres://postgres@127.0.0.1:$pg_port/$db?sslmode=disable"
tables = ["workflow_steps", "workflow_instances", "workflow_definitions"]
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = "127.0.0.1:$rport"
patterns = ["session:{tenant}:*", "csrf:{tenant}:*"]
[[deleter]]
name = "dynamodb:audit_logs"
plugin = "dynamodb"
[deleter.config]
table = "audit_logs"
partition_key = "tenant_id"
region = "us-east-1"
endpoint = "http://127.0.0.1:$dport"
access_key_id = "demo"
secret_access_key = "demo"
[[dlq_source]]
name = "kafka"
plugin = "kafka"
[dlq_source.config]
brokers = ["127.0.0.1:$kport"]
refresh_interval = "1s" # the DLQ topic is created after the daemon starts
TOML
say "starting lifecycled"
./bin/lifecycled run --config "$work/config.toml" 2>"$work/daemon.log" & pids+=($!)
export LIFECYCLED_ADDR="unix://$work/admin.sock"
for _ in $(seq 1 100); do ./bin/lifecycled status >/dev/null 2>&1 && break; sleep 0.2; done
./bin/lifecycled status
./bin/lifecycled plugins list

say "what would be deleted for tenant $tenant"
./bin/lifecycled tenant count "$tenant"
say "deleting it"
./bin/lifecycled tenant delete "$tenant" --yes --wait
say "the other tenant is untouched"
./bin/lifecycled tenant count "$other"

say "a consumer reads orders.events.v1 and dead-letters two messages (one not even JSON)"
printf '{"order_id":"122"}\n' | kcat -P -b "127.0.0.1:$kport" -t orders.events.v1
printf '{"order_id":"123"}\n' | kcat -P -b "127.0.0.1:$kport" -t orders.dlq.v1 -k order-123 \
  -H kafka_dlt-original-topic=orders.events.v1 -H "kafka_dlt-exception-message=payment provider timeout"
printf 'not json\n' | kcat -P -b "127.0.0.1:$kport" -t orders.dlq.v1 -H "error=cannot parse"
for _ in $(seq 1 50); do
  ./bin/lifecycled dlq list orders.dlq.v1 --format json 2>/dev/null | grep -q '"total_count": *2' && break
  sleep 0.2
done
./bin/lifecycled dlq topics
./bin/lifecycled dlq list orders.dlq.v1
say "retry all of them: republished with acks=all to orders.events.v1"
./bin/lifecycled dlq retry-all orders.dlq.v1
kcat -C -b "127.0.0.1:$kport" -t orders.events.v1 -o beginning -e -q -f 'key=%k headers=%h payload=%s\n'
if [ "${DEMO_UI:-}" = 1 ]; then
  say "a dead-letter storm for the console: 12 orders on a duplicate key, 8 payments that timed out"
  for i in $(seq 1 12); do printf 'order-%d\t{"order_id":"%d","amount":%d}\n' "$i" $((200 + i)) $((10 * i)); done |
    kcat -P -b "127.0.0.1:$kport" -t orders.dlq.v1 -K $'\t' -H kafka_dlt-original-topic=orders.events.v1 \
      -H kafka_dlt-exception-fqcn=org.springframework.dao.DataIntegrityViolationException \
      -H 'kafka_dlt-exception-message=ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)'
  for i in $(seq 1 8); do
    printf '{"payment_id":"p-%d"}\n' "$i" | kcat -P -b "127.0.0.1:$kport" -t payments.dlq.v1 \
      -H kafka_dlt-original-topic=payments.events.v1 -H "kafka_dlt-exception-message=payment provider timeout after 30000 ms (request $i)"
  done
  say "the web console: open the URL below in a browser on this machine; Ctrl-C ends the demo"
  # In the background and waited for: a SIGTERM to this script then ends
  # it at once (a foreground child would hold the signal until it ended).
  ./bin/lifecycled ui & pids+=($!)
  wait "${pids[-1]}"
fi
say "done; daemon log in $work/daemon.log (removed on exit)"
