#!/usr/bin/env bash
# Runs test packages again and again under CPU contention, to find the races
# a quiet machine hides. Usage: test/stress.sh COUNT BURNERS PACKAGE...
# Each package runs COUNT times, one run at a time (go test -count=1: Ginkgo
# suites refuse -count), while BURNERS busy loops compete for the CPU. Prints
# one line per run and a summary; exits non-zero when any run failed. The
# output of a failed run is kept in the log directory it names.
set -uo pipefail
count=${1:?COUNT}; burners=${2:?BURNERS}; shift 2
logs=$(mktemp -d "${TMPDIR:-/tmp}/fleet-stress-XXXXXX")
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop EXIT
for _ in $(seq "$burners"); do
  ( while :; do :; done ) &
  pids+=($!)
done
passed=0; failed=0
for pkg in "$@"; do
  for i in $(seq "$count"); do
    log="$logs/$(echo "$pkg" | tr '/.' '__')-$i.log"
    start=$(date +%s)
    if go test -count=1 -p 1 "$pkg" >"$log" 2>&1; then
      passed=$((passed + 1)); verdict=ok; rm -f "$log"
    else
      failed=$((failed + 1)); verdict="FAILED (log: $log)"
    fi
    echo "$pkg run $i/$count: $verdict in $(( $(date +%s) - start ))s"
  done
done
echo "stress: $passed passed, $failed failed ($burners CPU burners)"
[ "$failed" -eq 0 ]
