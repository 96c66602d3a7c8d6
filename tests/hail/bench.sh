#!/bin/sh
# Times Ganeti's hail (Debian package ganeti-htools) and Leasehold's
# allocator on the same IAllocator requests, and checks that their answers
# agree. Usage: tests/hail/bench.sh [OUTDIR] (default /tmp/leasehold-hail-bench)
# plain-10000 is skipped for hail unless HAIL_10K=1 (hail needs ~20 minutes).
set -eu
out=${1:-/tmp/leasehold-hail-bench}
hail=/usr/lib/ganeti/iallocators/hail
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
cd "$root"
go test -count=1 -run TestWriteBenchInputs ./pkg/allocator/iallocator -args -benchdir="$out"
: > "$out/hail-times.txt"
for f in "$out"/*.json; do
	n=$(basename "$f" .json)
	if [ "$n" = plain-10000 ] && [ "${HAIL_10K:-0}" != 1 ]; then continue; fi
	/usr/bin/time -f "$n user=%U sys=%S wall=%e maxrss_kb=%M" "$hail" "$f" > "$out/$n.hail" 2>> "$out/hail-times.txt"
done
cat "$out/hail-times.txt"
go test -run '^$' -bench . -benchmem -count "${COUNT:-6}" ./pkg/allocator/... | tee "$out/go-bench.txt"
