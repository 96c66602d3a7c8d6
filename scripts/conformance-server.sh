#!/bin/bash
# PLACEMENT_SERVER_CMD for the Placement conformance harness:
#
#   scripts/conformance-server.sh {port} {db}
#
# Maps the harness's per-file knobs onto Leasehold's configuration and
# runs `leasehold serve` with Placement at the root of 127.0.0.1:{port}.
#
#   PLACEMENT_POLICY_MODE          -> LEASEHOLD_PLACEMENT_POLICY_MODE
#   PLACEMENT_CORS_ALLOWED_ORIGIN  -> LEASEHOLD_CORS_ALLOWED_ORIGIN
#   PLACEMENT_CORS_ALLOW_HEADERS   -> LEASEHOLD_CORS_ALLOW_HEADERS
#
# CONFORMANCE_DB=sqlite (default): the database is sqlite:///{db}.
# CONFORMANCE_DB=mysql: a fresh database lh_conf_<random> is created on the
# server named by LEASEHOLD_TEST_MYSQL_DSN (mysql+pymysql://user:pw@host:port/,
# see scripts/mariadb-throwaway.sh) and dropped when the server exits.
# LEASEHOLD_BIN names the binary (default bin/leasehold).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 PORT DB_PATH" >&2
  exit 2
fi
PORT="$1"
DBPATH="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${LEASEHOLD_BIN:-$ROOT/bin/leasehold}"

# Only the knobs the harness exported are mapped; unset ones keep our
# config's defaults.
if [ -n "${PLACEMENT_POLICY_MODE:-}" ]; then export LEASEHOLD_PLACEMENT_POLICY_MODE="$PLACEMENT_POLICY_MODE"; fi
if [ -n "${PLACEMENT_CORS_ALLOWED_ORIGIN:-}" ]; then export LEASEHOLD_CORS_ALLOWED_ORIGIN="$PLACEMENT_CORS_ALLOWED_ORIGIN"; fi
if [ -n "${PLACEMENT_CORS_ALLOW_HEADERS:-}" ]; then export LEASEHOLD_CORS_ALLOW_HEADERS="$PLACEMENT_CORS_ALLOW_HEADERS"; fi

args=(serve --listen 127.0.0.1:0 --placement-listen "127.0.0.1:$PORT" --auth noauth)

case "${CONFORMANCE_DB:-sqlite}" in
  sqlite)
    exec "$BIN" "${args[@]}" --database "sqlite:///$DBPATH"
    ;;
  mysql)
    url="$("$ROOT/scripts/mysql-db.sh" create lh_conf_)"
    child="" cleaned=0
    cleanup() {
      [ "$cleaned" = 1 ] && return
      cleaned=1
      if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
      fi
      "$ROOT/scripts/mysql-db.sh" drop "$url" || true
    }
    trap 'cleanup; exit 0' TERM INT
    trap cleanup EXIT
    "$BIN" "${args[@]}" --database "$url" &
    child=$!
    set +e
    wait "$child"
    rc=$?
    child=""
    exit "$rc"
    ;;
  *)
    echo "conformance-server: CONFORMANCE_DB must be sqlite or mysql, not '$CONFORMANCE_DB'" >&2
    exit 2
    ;;
esac
