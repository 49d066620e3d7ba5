#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Times the phases of `make verify test`, so that a slow loop says where its
# time goes (docs/testing.md#where-the-time-goes).
#
#   hack/phase.sh LOG NAME [--per-package] -- CMD...
#       runs CMD and appends "NAME SECONDS" to LOG. With --per-package,
#       CMD is a `go test` whose "ok"/"FAIL" lines also become rows
#       "NAME PACKAGE SECONDS" (go test's own time for the package's test
#       binary: its run, not its compilation). CMD's output and exit status
#       pass through unchanged.
#   hack/phase.sh LOG --summary
#       prints LOG as a table, slowest package rows under their phase.
#
# LOG is per make invocation (the Makefile names it), so `make verify
# test` sums both goals and a later run starts afresh.
set -o errexit -o nounset -o pipefail

log=$1
shift

if [[ ${1:-} == --summary ]]; then
  [[ -s $log ]] || exit 0
  echo
  echo "Where the time went (docs/testing.md#where-the-time-goes):"
  awk '
    NF == 2 { phase[++n] = $1; secs[$1] = $2; total += $2 }
    # A package under its path in the module: "github.com/o/r/test/x" as
    # "test/x".
    NF == 3 { pkg = $2; if (pkg ~ /^[^\/]+\.[^\/]+\//) sub(/^[^\/]+\/[^\/]+\/[^\/]+\//, "", pkg)
              rows[$1] = rows[$1] sprintf("    %-58s %7.1f s\n", pkg, $3) }
    END {
      for (i = 1; i <= n; i++) {
        printf "  %-62s %7.1f s\n", phase[i], secs[phase[i]]
        printf "%s", rows[phase[i]]
      }
      printf "  %-62s %7.1f s\n", "total", total
    }' "$log"
  exit 0
fi

name=$1
shift
per_package=false
if [[ ${1:-} == --per-package ]]; then
  per_package=true
  shift
fi
[[ ${1:-} == -- ]] || { echo "usage: hack/phase.sh LOG NAME [--per-package] -- CMD..." >&2; exit 2; }
shift

mkdir -p "$(dirname "$log")"
start=$(date +%s.%N)
status=0
if $per_package; then
  # go test prints "ok  <pkg>\t<secs>s" or "FAIL\t<pkg>\t<secs>s" once a
  # package is done.
  "$@" | while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ $line =~ ^(ok|FAIL)[[:space:]]+([^[:space:]]+)[[:space:]]+([0-9.]+)s ]]; then
      printf '%s %s %s\n' "$name" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" >>"$log"
    fi
  done || status=$?
else
  "$@" || status=$?
fi
end=$(date +%s.%N)
secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
printf '%s %s\n' "$name" "$secs" >>"$log"
echo "phase ${name}: ${secs} s"
exit "$status"
