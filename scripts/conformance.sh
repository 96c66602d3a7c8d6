#!/bin/bash
# Build leasehold and run OpenStack Placement's upstream gabbi tests
# against it (the harness in ../shared/conformance/placement/, or
# $SHARED_DIR/conformance/placement/).
#
#   scripts/conformance.sh [harness args, e.g. -vv allocations*.yaml]
#   scripts/conformance.sh --unskip   # run only what the skip file lists, without
#                                     # skipping, and say which listed tests now
#                                     # pass (then delete their lines)
#
#   CONFORMANCE_DB=sqlite (default) | mysql   storage for each file's fresh server;
#       mysql uses LEASEHOLD_TEST_MYSQL_DSN, or starts scripts/mariadb-throwaway.sh
#   CONFORMANCE_JOBS=2                        files run in parallel
#   CONFORMANCE_SKIP_FILE=tests/conformance/expected-failures.txt
#
# Exit status: the harness's (0 iff no test failed). Its last line is
# "N passed, N failed, N skipped". Results are also written as JSON to
# bin/conformance-<db>.json.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
HARNESS="$SHARED_DIR/conformance/placement/run-gabbits.sh"
DB="${CONFORMANCE_DB:-sqlite}"
SKIP_FILE="${CONFORMANCE_SKIP_FILE:-$ROOT/tests/conformance/expected-failures.txt}"
# One file at a time by default: the harness picks each server's port by
# binding port 0 and closing it, and a second job's live client sockets
# can take that port before the server binds it ("address already in
# use", seen about once in five full runs with 2 jobs).
JOBS="${CONFORMANCE_JOBS:-1}"

if [ ! -x "$HARNESS" ] && [ ! -f "$HARNESS" ]; then
  echo "conformance: harness not found at $HARNESS (set SHARED_DIR to the folder holding conformance/)" >&2
  exit 2
fi
if ! /usr/bin/python3 -c 'import gabbi, yaml' 2>/dev/null; then
  echo "conformance: python3-gabbi/python3-yaml missing (scripts/deps.sh installs them)" >&2
  exit 2
fi

mkdir -p bin
BIN="$ROOT/bin/leasehold-conformance"
VERSION="$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)"
echo "conformance: building $BIN"
CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/leasehold/leasehold/pkg/server.Version=$VERSION" -o "$BIN" ./cmd/leasehold

case "$DB" in
  sqlite) ;;
  mysql)
    if [ -z "${LEASEHOLD_TEST_MYSQL_DSN:-}" ]; then
      LEASEHOLD_TEST_MYSQL_DSN="$("$ROOT/scripts/mariadb-throwaway.sh" start)"
      export LEASEHOLD_TEST_MYSQL_DSN
    fi
    ;;
  *) echo "conformance: CONFORMANCE_DB must be sqlite or mysql" >&2; exit 2 ;;
esac

UNSKIP=0
if [ "${1:-}" = --unskip ]; then
  UNSKIP=1
  shift
fi

export CONFORMANCE_DB="$DB" LEASEHOLD_BIN="$BIN"
export PLACEMENT_SERVER_CMD="$ROOT/scripts/conformance-server.sh {port} {db}"
# The servers log to each file's work dir; keep the run's output readable.
export LEASEHOLD_LOG_LEVEL="${LEASEHOLD_LOG_LEVEL:-warn}"
if [ "$UNSKIP" = 1 ]; then
  # The files the skip file names (whole or per test), run without it.
  mapfile -t files < <(sed -e 's/#.*//' -e 's/::.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "$SKIP_FILE" | sort -u)
  json="$ROOT/bin/conformance-$DB-unskip.json"
  echo "conformance: --unskip: running ${#files[@]} listed file patterns without the skip file"
  "$HARNESS" -j "$JOBS" --json "$json" "$@" "${files[@]}" || true
  /usr/bin/python3 - "$SKIP_FILE" "$json" <<'PY'
import fnmatch, json, sys
skips = [l.split('#', 1)[0].strip() for l in open(sys.argv[1])]
skips = [s for s in skips if s]
files = json.load(open(sys.argv[2]))['files']
now = []
for s in skips:
    f, _, t = s.partition('::')
    f, t = f.strip(), t.strip()
    outs = []
    for rec in files:
        if fnmatch.fnmatch(rec['file'], f):
            if t:
                outs += [o for n, o in rec['outcomes'].items() if n == t]
            else:
                outs += list(rec['outcomes'].values())
    if outs and all(o in ('pass', 'xfail') for o in outs):
        now.append(s)
print('conformance --unskip: %d listed entries now pass entirely%s' % (len(now), ':' if now else ''))
for s in now:
    print('  now passing: ' + s)
PY
  exit 0
fi

echo "conformance: $DB, $JOBS jobs, skip file ${SKIP_FILE#"$ROOT"/}"
set +e
"$HARNESS" -j "$JOBS" -v --skip-file "$SKIP_FILE" --json "$ROOT/bin/conformance-$DB.json" "$@"
rc=$?
set -e
echo "conformance ($DB): exit $rc"
exit "$rc"
