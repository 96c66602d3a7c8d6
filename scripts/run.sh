#!/bin/bash
# `make run`: start leasehold serve in the foreground, wait until it
# answers, print a short tour. Ctrl-C stops it.
#
#   scripts/run.sh BIN LISTEN PLACEMENT_LISTEN DATABASE
set -euo pipefail
BIN="${1:-bin/leasehold}" LISTEN="${2:-127.0.0.1:1234}" PLISTEN="${3:-127.0.0.1:8778}" DATABASE="${4:-sqlite:///leasehold.db}"

t0=$(date +%s%N)
"$BIN" serve --listen "$LISTEN" --placement-listen "$PLISTEN" --database "$DATABASE" --auth noauth &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid' INT TERM
for _ in $(seq 1 100); do
  if curl -fsS -o /dev/null "http://$LISTEN/healthcheck" 2>/dev/null; then
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    cat <<TOUR

leasehold $("$BIN" version | cut -d' ' -f2) is serving after ${ms} ms (database $DATABASE):
  Blazar v1   http://$LISTEN/v1        Placement  http://$LISTEN/placement  and  http://$PLISTEN/
  Auth is noauth: send X-Auth-Token: admin (or user:project); other tokens get 401.

  Try it (paste into a shell; README.md has the whole tour):
  pl() { curl -s -H 'X-Auth-Token: admin' -H 'OpenStack-API-Version: placement 1.39' -H 'Content-Type: application/json' "\$@"; echo; }
  P=http://$PLISTEN RP=6f3b0c8e-2a47-4c3e-9a59-6d0c2a0c1e11
  pl \$P/resource_providers -d '{"name": "compute-1", "uuid": "'\$RP'"}'
  pl -X PUT \$P/resource_providers/\$RP/inventories -d '{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 16384}}}'
  pl -X PUT \$P/allocations/0b7c2d3e-1f2a-4b5c-8d9e-0a1b2c3d4e5f -d '{"allocations": {"'\$RP'": {"resources": {"VCPU": 2, "MEMORY_MB": 2048}}}, "project_id": "p1", "user_id": "u1", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  pl \$P/resource_providers/\$RP/usages
  Ctrl-C stops the server.

TOUR
    wait "$pid"
    exit $?
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    exit $?
  fi
  sleep 0.05
done
echo "run: leasehold did not answer http://$LISTEN/healthcheck within 5 s" >&2
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
exit 1
