#!/usr/bin/env bash
# Installs (when it can) and starts what the tests need, and says clearly what
# is missing when it cannot. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }

have redis-server || need_apt+=(redis-server)
have node || need_apt+=(nodejs)
have npm || need_apt+=(npm)
have kcat || need_apt+=(kcat)
have promtool || need_apt+=(prometheus)
have protoc || need_apt+=(protobuf-compiler)
have systemd-analyze || need_apt+=(systemd)
have curl || need_apt+=(curl)
have psql || need_apt+=(postgresql-client)
have_initdb() { [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if [ -z "${LIFECYCLED_TEST_PG:-}" ] && ! have_initdb; then need_apt+=(postgresql); fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    echo "test-deps: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test-deps: missing ${need_apt[*]}; install them (Debian: sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

# PostgreSQL: `make test` runs the tests against a throwaway cluster that
# scripts/test-pg.sh creates (initdb -A trust, a free port) and removes, so the
# machine's own cluster is neither needed nor touched. LIFECYCLED_TEST_PG
# names another server instead.
if [ -z "${LIFECYCLED_TEST_PG:-}" ] && ! have_initdb; then
  echo "test-deps: no PostgreSQL server binaries (initdb); install postgresql or set LIFECYCLED_TEST_PG" >&2
  exit 1
fi

# dynalite, pinned by test/dynalite/package-lock.json.
if [ ! -f test/dynalite/node_modules/dynalite/cli.js ] || [ test/dynalite/package-lock.json -nt test/dynalite/node_modules/.package-lock.json ]; then
  echo "test-deps: installing dynalite"
  npm ci --prefix test/dynalite --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "test-deps: ok (PostgreSQL, redis-server, dynalite, kcat, promtool, protoc, systemd-analyze, curl)"
