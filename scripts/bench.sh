#!/bin/bash
# `make bench`: every Go benchmark, 6 runs each, saved as
# bench-results/go-<date>-<commit>.txt. When benchstat is installed it
# summarises the run, compared with the previous one if there is one.
#
#   BENCH=Regexp (default .)  PKGS="./pkg/..." (default ./...)  COUNT=6
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
mkdir -p bench-results
prev="$(ls -1t bench-results/go-*.txt 2>/dev/null | head -1 || true)"
out="bench-results/go-$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short HEAD 2>/dev/null || echo nogit).txt"
# shellcheck disable=SC2086
go test -run='^$' -bench="${BENCH:-.}" -benchmem -count="${COUNT:-6}" ${PKGS:-./...} | tee "$out"
echo "bench: results in $out"
bs="$(command -v benchstat || true)"
[ -z "$bs" ] && [ -x "$(go env GOPATH)/bin/benchstat" ] && bs="$(go env GOPATH)/bin/benchstat"
if [ -z "$bs" ]; then
  echo "bench: benchstat not installed (go install golang.org/x/perf/cmd/benchstat@latest); raw results only"
elif [ -n "$prev" ]; then
  "$bs" "$prev" "$out"
else
  "$bs" "$out"
fi
