#!/usr/bin/env bash
# Runs a command with LIFECYCLED_TEST_PG pointing at a throwaway PostgreSQL
# cluster: initdb -A trust in a temporary directory, on a free loopback port,
# with the server binaries of the installed PostgreSQL (pg_config --bindir).
# The cluster is stopped and removed when the command ends. The machine's own
# cluster is never used nor changed, so a stock Debian install (scram-sha-256
# on 127.0.0.1) works as well as a trust-auth one.
#
# When LIFECYCLED_TEST_PG is already set, the command runs against that server.
#
#   scripts/test-pg.sh go test ./...
set -euo pipefail

if [ -n "${LIFECYCLED_TEST_PG:-}" ]; then
  exec "$@"
fi

bindir=""
if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
  bindir=$(pg_config --bindir)
else
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "test-pg: no PostgreSQL server binaries (initdb) found: run make test-deps, or set LIFECYCLED_TEST_PG" >&2
  exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-test-pg.XXXXXX")
as=()
if [ "$(id -u)" = 0 ]; then
  # initdb refuses to run as root: the server runs as the postgres user.
  id postgres >/dev/null 2>&1 || { echo "test-pg: running as root needs the postgres user (Debian's postgresql package creates it)" >&2; exit 1; }
  chown postgres "$dir"
  as=(runuser -u postgres --)
fi

stop() {
  "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT

"${as[@]}" "$bindir/initdb" -A trust -U postgres -E UTF8 --locale=C.UTF-8 -D "$dir/data" >"$dir/initdb.log" 2>&1 || {
  cat "$dir/initdb.log" >&2; exit 1; }

started=""
for _ in $(seq 1 20); do
  port=$(( 20000 + RANDOM % 40000 ))
  # Durability is not under test here: no fsync makes the suite faster.
  if "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/server.log" \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c shared_buffers=128MB" \
      start >/dev/null 2>&1; then
    started=$port
    break
  fi
done
if [ -z "$started" ]; then
  echo "test-pg: could not start PostgreSQL:" >&2
  tail -20 "$dir/server.log" >&2 || true
  exit 1
fi
export LIFECYCLED_TEST_PG="postgres://postgres@127.0.0.1:$started/postgres?sslmode=disable"
echo "test-pg: throwaway PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$started ($dir)"
# The command runs in the background so that a SIGTERM or Ctrl-C reaching
# this script (make demo stopped) is passed on to it and the cluster still
# goes (the EXIT trap); a foreground child would hold the signal until it
# ended by itself.
set +e
"$@" &
child=$!
# TERM for Ctrl-C too: a background child of a script ignores SIGINT.
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' TERM
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 130' INT
wait "$child"
rc=$?
exit $rc
