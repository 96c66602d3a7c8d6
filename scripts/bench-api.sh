#!/bin/bash
# `make bench-api`: HTTP load test of the Placement API with wrk (a second
# process, 10 connections), on SQLite and on MariaDB:
#
#   GET /resource_providers/{uuid}        target >= 5,000 requests/s
#   PUT /allocations/{consumer}           target >= 1,500 durable writes/s
#                                         (fresh consumer per request,
#                                         consumer_generation null, 1.39)
#
# Afterwards the providers' usages are read back: every 204 must have left
# its allocation behind (the writes are durable and counted).
#
#   BENCH_DBS="sqlite mysql"  BENCH_SECONDS=10  BENCH_CONNS=10  BENCH_THREADS=2
#   BENCH_PROVIDERS_N=20  BENCH_LOG_LEVEL=warn  BENCH_MYSQL_SOCKET=/path/mysqld.sock
#   BENCH_PPROF=1: run scripts/pprofserve (leasehold serve + net/http/pprof)
#   instead and save a CPU profile of each run in bench-results/cpu-<db>-<get|put>.pprof
#   (go tool pprof -top bin/leasehold-pprof bench-results/cpu-sqlite-put.pprof)
# Results: a table on stdout, also saved in bench-results/api-<date>.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${LEASEHOLD_BIN:-$ROOT/bin/leasehold}"
DBS="${BENCH_DBS:-sqlite mysql}"
SECS="${BENCH_SECONDS:-10}"
CONNS="${BENCH_CONNS:-10}"
THREADS="${BENCH_THREADS:-2}"
NPROV="${BENCH_PROVIDERS_N:-20}"
MV="OpenStack-API-Version: placement 1.39"

command -v wrk >/dev/null || { LEASEHOLD_DEPS="wrk curl" scripts/deps.sh; command -v wrk >/dev/null || { echo "bench-api: wrk not installed" >&2; exit 2; }; }
if [ -n "${BENCH_PPROF:-}" ]; then
  BIN="$ROOT/bin/leasehold-pprof"
  go build -o "$BIN" ./scripts/pprofserve
fi
[ -x "$BIN" ] || { echo "bench-api: $BIN missing (make build)" >&2; exit 2; }
mkdir -p bench-results
OUT="bench-results/api-$(date -u +%Y%m%dT%H%M%SZ).txt"
WORK="$(mktemp -d /tmp/leasehold-bench.XXXXXX)"
server_pid="" mysql_url=""

stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
  if [ -n "$mysql_url" ]; then scripts/mysql-db.sh drop "$mysql_url" || true; mysql_url=""; fi
}
trap stop_server EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api() { curl -fsS -H "X-Auth-Token: admin" -H "$MV" -H "Content-Type: application/json" "$@"; }

declare -a ROWS=()
for db in $DBS; do
  case "$db" in
    sqlite) url="sqlite:///$WORK/bench-$db.db" ;;
    mysql)
      if [ -z "${LEASEHOLD_TEST_MYSQL_DSN:-}" ]; then
        LEASEHOLD_TEST_MYSQL_DSN="$(scripts/mariadb-throwaway.sh start)"
        export LEASEHOLD_TEST_MYSQL_DSN
      fi
      mysql_url="$(scripts/mysql-db.sh create lh_bench_)"
      url="$mysql_url"
      # BENCH_MYSQL_SOCKET=/path/mysqld.sock: reach the server through its
      # Unix socket instead of loopback TCP.
      if [ -n "${BENCH_MYSQL_SOCKET:-}" ]; then url="$url?unix_socket=$BENCH_MYSQL_SOCKET"; fi
      ;;
    *) echo "bench-api: unknown db $db" >&2; exit 2 ;;
  esac
  port="$(free_port)"
  P="http://127.0.0.1:$port"
  extra=()
  if [ -n "${BENCH_PPROF:-}" ]; then extra+=(--pprof-listen "127.0.0.1:$(free_port)"); fi
  "$BIN" serve --listen 127.0.0.1:0 --placement-listen "127.0.0.1:$port" --database "$url" --auth noauth \
    --log-level "${BENCH_LOG_LEVEL:-warn}" "${extra[@]}" >"$WORK/server-$db.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 200); do curl -fsS -o /dev/null "$P/" 2>/dev/null && break; sleep 0.05; done
  curl -fsS -o /dev/null "$P/" || { echo "bench-api: server did not start on $db:"; cat "$WORK/server-$db.log"; exit 1; }

  # Providers with room for every allocation the run can make.
  provs=()
  for i in $(seq 1 "$NPROV"); do
    u="$(python3 -c 'import uuid; print(uuid.uuid4())')"
    api -o /dev/null "$P/resource_providers" -d "{\"name\": \"bench-$db-$i\", \"uuid\": \"$u\"}"
    api -o /dev/null -X PUT "$P/resource_providers/$u/inventories" \
      -d '{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 100000000, "max_unit": 1000}, "MEMORY_MB": {"total": 1000000000, "max_unit": 100000}}}'
    provs+=("$u")
  done
  BENCH_PROVIDERS="$(IFS=,; echo "${provs[*]}")"
  export BENCH_PROVIDERS

  run_wrk() { # name lua
    local name="$1" lua="$2" log="$WORK/wrk-$db-$1.txt" prof=""
    if [ -n "${BENCH_PPROF:-}" ]; then
      curl -fsS -o "bench-results/cpu-$db-$name.pprof" "http://${extra[1]}/debug/pprof/profile?seconds=$((SECS - 2))" &
      prof=$!
    fi
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency -s "$lua" "$P" >"$log" 2>"$WORK/wrk-$db-$name.err" || true
    if [ -n "$prof" ]; then wait "$prof" || true; fi
    sed "s/^/    [$db $name] /" "$log" >&2
    cat "$WORK/wrk-$db-$name.err" >&2
    local rps p50 p99 non2xx reqs
    rps="$(awk '/^Requests\/sec:/ {print $2}' "$log")"
    p50="$(awk '$1 == "50%" {print $2}' "$log")"
    p99="$(awk '$1 == "99%" {print $2}' "$log")"
    non2xx="$(awk '/Non-2xx or 3xx responses:/ {print $NF}' "$log")"
    reqs="$(awk '/requests in/ {print $1}' "$log")"
    echo "${rps:-0} ${p50:-?} ${p99:-?} ${non2xx:-0} ${reqs:-0}"
  }
  read -r g_rps g_p50 g_p99 g_err g_n < <(run_wrk get scripts/bench/get-provider.lua)
  read -r p_rps p_p50 p_p99 p_err p_n < <(run_wrk put scripts/bench/put-allocations.lua)

  # Durability/accounting check: allocations made = 204 answers.
  used=0
  for u in "${provs[@]}"; do
    v="$(api "$P/resource_providers/$u/usages" | python3 -c 'import json,sys; print(json.load(sys.stdin)["usages"].get("VCPU", 0))')"
    used=$((used + v))
  done
  # wrk stops with up to BENCH_CONNS requests in flight (and counts timed
  # out ones as errors); those still complete on the server.
  ok_puts=$((p_n - p_err))
  timeouts="$(sed -n 's/.*errors_timeout=\([0-9]*\).*/\1/p' "$WORK/wrk-$db-put.txt")"
  slack=$((CONNS + ${timeouts:-0}))
  if [ "$used" -ge "$ok_puts" ] && [ "$used" -le $((ok_puts + slack)) ]; then
    check="ok ($used allocations for $ok_puts 2xx answers + <= $slack in flight)"
  else
    check="MISMATCH: $used VCPU used for $ok_puts 2xx answers (+ <= $slack in flight)"
  fi
  ROWS+=("$(printf '%-7s %10s %8s %8s %7s   %10s %8s %8s %7s   %s' "$db" "$g_rps" "$g_p50" "$g_p99" "$g_err" "$p_rps" "$p_p50" "$p_p99" "$p_err" "$check")")
  stop_server
done

{
  echo "leasehold $("$ROOT/bin/leasehold" version 2>/dev/null | cut -d' ' -f2), $(nproc) cores, wrk -t$THREADS -c$CONNS -d${SECS}s, $NPROV providers, $(date -u +%FT%TZ)"
  printf '%-7s %10s %8s %8s %7s   %10s %8s %8s %7s   %s\n' db "GET/s" p50 p99 non2xx "PUT/s" p50 p99 non2xx "usages check"
  printf '%s\n' "${ROWS[@]}"
  echo "targets: GET >= 5000/s, PUT (durable) >= 1500/s"
} | tee "$OUT"
echo "bench-api: saved $OUT"
