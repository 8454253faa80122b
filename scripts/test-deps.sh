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
have psql || need_apt+=(postgresql-client)
if ! have pg_ctlcluster && [ -z "${LIFECYCLED_TEST_PG:-}" ]; then need_apt+=(postgresql); fi

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

# PostgreSQL: the tests create and drop their own databases on this server.
if [ -z "${LIFECYCLED_TEST_PG:-}" ]; then
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
    if [ -z "$ver" ]; then
      echo "test-deps: no PostgreSQL cluster found under /etc/postgresql" >&2
      exit 1
    fi
    echo "test-deps: starting PostgreSQL $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    echo "test-deps: cannot connect as postgres@127.0.0.1:5432 (the tests expect trust auth, or set LIFECYCLED_TEST_PG)" >&2
    exit 1
  fi
fi

# dynalite, pinned by test/dynalite/package-lock.json.
if [ ! -f test/dynalite/node_modules/dynalite/cli.js ] || [ test/dynalite/package-lock.json -nt test/dynalite/node_modules/.package-lock.json ]; then
  echo "test-deps: installing dynalite"
  npm ci --prefix test/dynalite --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "test-deps: ok (PostgreSQL, redis-server, dynalite, kcat, promtool, protoc)"
