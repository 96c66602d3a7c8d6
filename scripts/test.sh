#!/bin/bash
# `make test`: every suite, with a summary at the end.
#
#   1. go test -race -shuffle=on ./...                 (SQLite)
#      It includes the HTTP fuzzer's CI slice (tests/httpfuzz: 10^4 generated
#      requests over both APIs; LEASEHOLD_HTTPFUZZ_N/SEED change it, make fuzz
#      runs 10^6).
#   2. go test -shuffle=on again for every package whose tests use
#      pkg/db/dbtest, against a throw-away MariaDB (LEASEHOLD_TEST_MYSQL_DSN;
#      scripts/mariadb-throwaway.sh). Without -race: the race detector sees
#      Go memory races, which do not depend on the database, and run 1 had it;
#      MARIADB_RACE=1 adds it here too.
#   3. Placement conformance on SQLite               (scripts/conformance.sh)
#   4. Placement conformance on MariaDB
#
# First it runs scripts/deps.sh (installs what is missing when root with
# apt-get). A suite that cannot run here is SKIPPED LOUDLY with the reason,
# the others still run; under CI=true a skipped suite fails the run unless
# LEASEHOLD_ALLOW_SKIP=1. Exit status: 0 iff every suite that ran passed
# (and, under CI, none was skipped).
#
# Knobs: LEASEHOLD_TEST_MYSQL_DSN (use this server instead of starting the
# throw-away one), TEST_SUITES (default "go mysql conformance-sqlite
# conformance-mysql"), GOTEST_FLAGS (extra go test flags), GOTEST_TIMEOUT
# (a test binary's bound, default 25m: the suites against real Nova and
# Horizon run minutes under -race on 2 cores), SHARED_DIR.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SUITES="${TEST_SUITES:-go mysql conformance-sqlite conformance-mysql}"
LOGDIR="$(mktemp -d "${TMPDIR:-/tmp}/leasehold-test.XXXXXX")"
START=$(date +%s)
declare -a SUMMARY=()
failed=0
skipped=0

banner() { printf '\n==== %s ====\n' "$*"; }
loud() {
  echo "################################################################################"
  for l in "$@"; do echo "### $l"; done
  echo "################################################################################"
}
PHASE_START=$(date +%s)
phase_start() { PHASE_START=$(date +%s); }
record() { # suite status detail
  local took="$(( $(date +%s) - PHASE_START ))s"
  [ "$2" = SKIPPED ] && took=-
  SUMMARY+=("$(printf '%-22s %-8s %6s  %s' "$1" "$2" "$took" "$3")")
  case "$2" in
    FAIL) failed=$((failed + 1)) ;;
    SKIPPED) skipped=$((skipped + 1)) ;;
  esac
}
want() { [[ " $SUITES " == *" $1 "* ]]; }
# go test's own closing lines, counted: "ok" packages and FAIL lines.
gosummary() {
  local log="$1" ok fail
  ok=$(grep -cE '^ok[[:space:]]' "$log" || true)
  fail=$(grep -cE '^FAIL[[:space:]]+github' "$log" || true)
  echo "$ok packages ok, $fail packages FAIL"
}

banner "dependencies (scripts/deps.sh)"
"$ROOT/scripts/deps.sh" || loud "scripts/deps.sh failed (exit $?); going on with what is installed"

# ---- what this machine has ---------------------------------------------
find_hail() {
  local c
  for c in "$(command -v hail 2>/dev/null)" /usr/lib/ganeti/iallocators/hail /usr/lib/ganeti/*/usr/lib/ganeti/iallocators/hail; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}
if HAIL="$(find_hail)"; then
  export LEASEHOLD_REQUIRE_HAIL=1 LEASEHOLD_HAIL="$HAIL"
  export PATH="$PATH:$(dirname "$HAIL")"
  echo "hail: $HAIL (LEASEHOLD_REQUIRE_HAIL=1: the allocator's differential tests must run)"
else
  unset LEASEHOLD_REQUIRE_HAIL
  loud "hail (Debian ganeti-htools) is NOT installed: the allocator's differential tests against hail are SKIPPED"
  record "allocator-vs-hail" SKIPPED "ganeti-htools not installed (need root+apt: scripts/deps.sh)"
fi
for tool in blazar openstack; do
  command -v "$tool" >/dev/null 2>&1 || {
    loud "'$tool' (Debian python3-blazarclient / python3-openstackclient) is NOT installed: client-compatibility tests that need it are SKIPPED"
    record "client-$tool" SKIPPED "$tool CLI not installed"
  }
done

# The Keystone tests (tests/keystone) skip loudly without python3-keystone;
# under CI they must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_KEYSTONE=1
fi
if ! command -v keystone-manage >/dev/null 2>&1; then
  loud "Keystone (Debian python3-keystone) is NOT installed: the token-validation tests against a real Keystone are SKIPPED"
  record "keystone" SKIPPED "python3-keystone not installed"
fi

# The Horizon browser test (tests/horizon) skips loudly without Debian's
# openstack-dashboard, chromium, chromium-driver and python3-selenium;
# under CI it must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_HORIZON=1
fi
for f in /usr/share/openstack-dashboard/manage.py /usr/bin/chromium /usr/bin/chromedriver /usr/lib/python3/dist-packages/selenium; do
  if [ ! -e "$f" ]; then
    loud "Horizon test: $f is missing (openstack-dashboard chromium chromium-driver python3-selenium): the browser test is SKIPPED"
    record "horizon" SKIPPED "$f missing"
    break
  fi
done

# The notification tests (tests/notify) skip loudly without Debian's
# rabbitmq-server and python3-oslo.messaging; under CI they must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_RABBITMQ=1
fi
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || ! /usr/bin/python3 -c 'import oslo_messaging' 2>/dev/null; then
  loud "RabbitMQ (rabbitmq-server) or python3-oslo.messaging is NOT installed: the usage-notification tests are SKIPPED"
  record "notify" SKIPPED "rabbitmq-server or python3-oslo.messaging not installed"
fi

# The Nova tests (tests/nova: nova-box with the upstream BlazarFilter and
# a real Keystone; tests/novafilter: LeaseholdFilter in nova-box's
# scheduler, and its unit tests) skip loudly without python3-nova and
# friends; under CI they must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_NOVA=1
fi
if ! /usr/bin/python3 -c 'import nova, placement, oslotest, wsgi_intercept' >/dev/null 2>&1; then
  loud "Nova (Debian python3-nova python3-placement python3-oslotest python3-wsgi-intercept) is NOT installed: the tests against a real Nova are SKIPPED"
  record "nova" SKIPPED "python3-nova, python3-placement, python3-oslotest or python3-wsgi-intercept not installed"
fi

# The external-Placement suite (tests/extplacement: the real upstream
# Placement under uwsgi behind a real Keystone) skips loudly without
# python3-placement, uwsgi-plugin-python3 and python3-keystone; under CI it
# must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_PLACEMENT=1
fi
if [ ! -x /usr/bin/placement-api ] || [ ! -e /usr/lib/uwsgi/plugins/python3_plugin.so ] || ! command -v keystone-manage >/dev/null 2>&1; then
  loud "Placement (Debian python3-placement uwsgi-plugin-python3 python3-keystone) is NOT installed: the external-Placement tests are SKIPPED"
  record "extplacement" SKIPPED "python3-placement, uwsgi-plugin-python3 or python3-keystone not installed"
fi

# The Galera suite (tests/galera: a 3-node cluster on loopback, started by
# scripts/galera-throwaway.sh) skips loudly without mariadb-server, galera-4
# and rsync, and the database-restart fault test (tests/faults) without
# mariadb-server; under CI they must run.
if [ "${CI:-}" = true ]; then
  export LEASEHOLD_REQUIRE_GALERA=1 LEASEHOLD_REQUIRE_MARIADB=1
fi
if [ ! -e /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null 2>&1 ||
   ! { command -v mariadbd || [ -x /usr/sbin/mariadbd ]; } >/dev/null 2>&1; then
  loud "Galera (Debian mariadb-server galera-4 rsync) is NOT installed: the replicas-on-Galera tests are SKIPPED"
  record "galera" SKIPPED "mariadb-server/galera-4/rsync not installed"
fi

RACE=(-race)
if ! command -v "${CC:-gcc}" >/dev/null 2>&1; then
  loud "no C compiler: -race needs cgo, so the Go tests run WITHOUT the race detector"
  RACE=()
fi

# ---- 1. go test on SQLite ----------------------------------------------
if want go; then
  banner "go test ${RACE[*]} -shuffle=on ./...  (SQLite)"
  phase_start
  log="$LOGDIR/go-sqlite.log"
  # shellcheck disable=SC2086
  env -u LEASEHOLD_TEST_MYSQL_DSN CGO_ENABLED=1 go test "${RACE[@]}" -shuffle=on -timeout "${GOTEST_TIMEOUT:-25m}" ${GOTEST_FLAGS:-} ./... 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then record "go (SQLite)" PASS "$(gosummary "$log")"; else record "go (SQLite)" FAIL "exit $rc; $(gosummary "$log")"; fi
fi

# ---- MariaDB -----------------------------------------------------------
MYSQL_DSN="${LEASEHOLD_TEST_MYSQL_DSN:-}"
MYSQL_WHY=""
if (want mysql || want conformance-mysql) && [ -z "$MYSQL_DSN" ]; then
  banner "throw-away MariaDB (scripts/mariadb-throwaway.sh start)"
  if MYSQL_DSN="$("$ROOT/scripts/mariadb-throwaway.sh" start)"; then
    echo "MariaDB ready on 127.0.0.1:${LEASEHOLD_MARIADB_PORT:-3307}"
  else
    MYSQL_DSN=""
    MYSQL_WHY="throw-away MariaDB could not start (not installed and no root+apt, or see its log)"
  fi
fi

# ---- 2. go test on MariaDB ---------------------------------------------
if want mysql; then
  if [ -z "$MYSQL_DSN" ]; then
    loud "MariaDB suite SKIPPED: $MYSQL_WHY"
    record "go (MariaDB)" SKIPPED "$MYSQL_WHY"
  else
    # Every package whose tests use pkg/db/dbtest (directly or not).
    mapfile -t pkgs < <(go list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... 2>/dev/null |
      grep -E '^[^|]+ \[[^|]+\.test\]\|.*github.com/leasehold/leasehold/pkg/db/dbtest( |$)' |
      sed -E 's/^[^|]* \[([^|]+)\.test\]\|.*/\1/' | sort -u)
    MRACE=()
    if [ "${MARIADB_RACE:-}" = 1 ]; then MRACE=("${RACE[@]}"); fi
    banner "go test ${MRACE[*]} -shuffle=on (MariaDB) on ${#pkgs[@]} packages that use dbtest"
    phase_start
    printf '  %s\n' "${pkgs[@]}"
    if [ ${#pkgs[@]} = 0 ]; then
      record "go (MariaDB)" FAIL "no package uses pkg/db/dbtest (go list failed?)"
    else
      log="$LOGDIR/go-mysql.log"
      # shellcheck disable=SC2086
      LEASEHOLD_TEST_MYSQL_DSN="$MYSQL_DSN" CGO_ENABLED=1 go test "${MRACE[@]}" -shuffle=on -timeout "${GOTEST_TIMEOUT:-25m}" ${GOTEST_FLAGS:-} "${pkgs[@]}" 2>&1 | tee "$log"
      rc=${PIPESTATUS[0]}
      if [ "$rc" = 0 ]; then record "go (MariaDB)" PASS "$(gosummary "$log")"; else record "go (MariaDB)" FAIL "exit $rc; $(gosummary "$log")"; fi
    fi
  fi
fi

# ---- 3./4. conformance -------------------------------------------------
conformance() { # db
  local db="$1" log="$LOGDIR/conformance-$1.log" rc line
  banner "Placement conformance ($db)"
  phase_start
  CONFORMANCE_DB="$db" LEASEHOLD_TEST_MYSQL_DSN="$MYSQL_DSN" "$ROOT/scripts/conformance.sh" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)"
  if [ "$rc" = 0 ]; then record "conformance ($db)" PASS "$line"; else record "conformance ($db)" FAIL "exit $rc; ${line:-no totals line}"; fi
}
have_gabbi() { /usr/bin/python3 -c 'import gabbi, yaml' 2>/dev/null; }
SHARED="${SHARED_DIR:-$ROOT/../shared}"
conf_why=""
if [ ! -e "$SHARED/conformance/placement/run-gabbits.sh" ]; then
  conf_why="harness not found at $SHARED/conformance/placement (set SHARED_DIR)"
elif ! have_gabbi; then
  conf_why="python3-gabbi/python3-yaml not installed (need root+apt: scripts/deps.sh)"
fi
for db in sqlite mysql; do
  want "conformance-$db" || continue
  if [ -n "$conf_why" ]; then
    loud "Placement conformance ($db) SKIPPED: $conf_why"
    record "conformance ($db)" SKIPPED "$conf_why"
  elif [ "$db" = mysql ] && [ -z "$MYSQL_DSN" ]; then
    loud "Placement conformance (mysql) SKIPPED: $MYSQL_WHY"
    record "conformance (mysql)" SKIPPED "$MYSQL_WHY"
  else
    conformance "$db"
  fi
done

# ---- summary -----------------------------------------------------------
banner "make test summary ($(( $(date +%s) - START )) s, logs in $LOGDIR)"
printf '%s\n' "${SUMMARY[@]}"
if [ "$skipped" -gt 0 ]; then
  loud "$skipped suite(s) SKIPPED on this machine (see above for why)"
  if [ "${CI:-}" = true ] && [ "${LEASEHOLD_ALLOW_SKIP:-}" != 1 ]; then
    echo "CI=true: a skipped suite fails the run (LEASEHOLD_ALLOW_SKIP=1 to allow)"
    failed=$((failed + 1))
  fi
fi
if [ "$failed" -gt 0 ]; then
  echo "make test: FAILED"
  exit 1
fi
echo "make test: all suites passed"
