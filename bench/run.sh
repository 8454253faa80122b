#!/usr/bin/env bash
# Runs every benchmark with its baseline in the same run and prints one
# report (also saved under bench/out/). Needs `make build` and the test
# services (`make test-deps`): PostgreSQL, redis-server, dynalite, kcat.
# Select with BENCH="pluginrpc deletebench dlqbench rabbitbench searchbench archivebench planbench historybench reverifybench".
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
out="bench/out/$(date -u +%Y%m%dT%H%M%SZ).txt"
benches=${BENCH:-"pluginrpc deletebench dlqbench rabbitbench searchbench archivebench planbench historybench reverifybench"}
for b in $benches; do
  go build -o "bin/bench-$b" "./bench/cmd/$b"
done
# deletebench compares the postgres plugin with the same plugin built
# without its independent proof, to measure what the proof costs.
go build -tags lifecycled_noproof -o bin/lifecycled-plugin-postgres-noproof ./plugins/postgres
{
  echo "lifecycled benchmarks, $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPU, $(go version | cut -d' ' -f3)"
  for b in $benches; do
    "bin/bench-$b"
  done
} 2>&1 | tee "$out"
echo "saved to $out"
