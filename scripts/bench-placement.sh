#!/usr/bin/env bash
# make bench-placement: GET /allocation_candidates (and, on the flat and
# nested datasets, GET /resource_providers with filters) under load, Leasehold vs
# the real Placement 8.0.0 (Debian placement-api, started beside it by
# ../shared/conformance/placement/real-placement-server.sh; install it with
# `setup.sh full`). For each perfload dataset (scripts/benchplacement):
# fresh servers on fresh SQLite databases, the dataset loaded over HTTP
# into both, then the dataset's query (and its limit=5 variant) run by 10
# concurrent clients (and by one client alone) for DURATION against each;
# p50/p99 latency, requests/s and the ratios come from this one run.
# Leasehold's peak RSS (VmHWM) is read after the runs. Results: bench-results/placement-<time>/results.txt (+ .jsonl).
#
# Env: DURATION (10s), N_FLAT (1000 providers), N_NESTED (1000 trees),
# CONCURRENCY (10), DATASETS ("flat nested wide"), UPSTREAM=0 to skip the
# real Placement.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
N_FLAT=${N_FLAT:-1000}
N_NESTED=${N_NESTED:-1000}
CONCURRENCY=${CONCURRENCY:-10}
DATASETS=${DATASETS:-flat nested wide}
UPSTREAM=${UPSTREAM:-1}
CONF=${PLACEMENT_CONFORMANCE:-../shared/conformance/placement}
OUT=${BENCH_OUT:-bench-results/placement-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /tmp/bench-placement-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ "$UPSTREAM" = 1 ] && ! command -v uwsgi >/dev/null || [ ! -x /usr/bin/placement-api ]; then
  echo "real Placement not installed (run $CONF/setup.sh full); measuring Leasehold only" >&2
  UPSTREAM=0
fi

go build -o "$WORK/leasehold" ./cmd/leasehold
go build -o "$WORK/benchplacement" ./scripts/benchplacement

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_up() {
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not start" >&2
  return 1
}

LH_PID=
start_leasehold() { # port db
  setsid "$WORK/leasehold" serve --listen 127.0.0.1:0 --placement-listen "127.0.0.1:$1" \
    --database "sqlite:///$2" --auth noauth >"$WORK/leasehold-$1.log" 2>&1 &
  LH_PID=$!
  PIDS+=("$LH_PID")
  wait_up "$1"
}

start_upstream() { # port db
  setsid "$CONF/real-placement-server.sh" "$1" "$2" >"$WORK/upstream-$1.log" 2>&1 &
  PIDS+=("$!")
  wait_up "$1"
}

stop_all() {
  for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
hwm_mb() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

{
  echo "# bench-placement $(date -u +%FT%TZ) on $(nproc) cores; $CONCURRENCY clients, $DURATION per query and target"
  echo "# leasehold: SQLite; upstream: Placement 8.0.0 (uwsgi, 1 process x 1 thread as real-placement-server.sh runs it)"
} | tee "$OUT/results.txt"

for ds in $DATASETS; do
  n=$N_FLAT
  [ "$ds" = nested ] && n=$N_NESTED
  lp=$(free_port)
  start_leasehold "$lp" "$WORK/lh-$ds.db"
  targets=(-target "leasehold=http://127.0.0.1:$lp")
  loads=("$WORK/benchplacement" load -url "http://127.0.0.1:$lp" -dataset "$ds" -n "$n" -workers 2)
  "${loads[@]}" 2>&1 | tee -a "$OUT/results.txt"
  if [ "$UPSTREAM" = 1 ]; then
    up=$(free_port)
    start_upstream "$up" "$WORK/up-$ds.sqlite"
    "$WORK/benchplacement" load -url "http://127.0.0.1:$up" -dataset "$ds" -n "$n" -workers 2 2>&1 | tee -a "$OUT/results.txt"
    targets+=(-target "upstream=http://127.0.0.1:$up")
  fi
  extra=()
  if [ "$ds" = wide ]; then
    # upstream builds the full 8^8 product before applying limit; bound it
    extra=(-timeout 120s -max-requests 200)
  fi
  "$WORK/benchplacement" bench -dataset "$ds" -c "$CONCURRENCY" -duration "$DURATION" "${extra[@]}" "${targets[@]}" \
    | tee -a "$OUT/results.jsonl" | grep '^#' | tee -a "$OUT/results.txt" || true
  if [ "$ds" = flat ] || [ "$ds" = nested ]; then
    # GET /resource_providers with the resources (and member_of, required)
    # and in_tree filters on the same providers.
    "$WORK/benchplacement" bench -path /resource_providers -dataset "$ds" -c "$CONCURRENCY" -duration "$DURATION" "${targets[@]}" \
      | tee -a "$OUT/results.jsonl" | grep '^#' | tee -a "$OUT/results.txt" || true
  fi
  echo "# $ds: leasehold RSS $(rss_mb "$LH_PID") MB after the runs, peak $(hwm_mb "$LH_PID") MB" | tee -a "$OUT/results.txt"
  stop_all
done
echo "results: $OUT/results.txt"
