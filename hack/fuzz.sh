#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Runs every Go fuzz target in the module for FUZZTIME each (a duration such
# as 20s, or Nx for N inputs), on top of its seed corpus. Targets are found,
# not listed here, so a new one is fuzzed without editing this script. A
# failing input is saved under the package's testdata/fuzz/ and fails the
# run, as `go test -fuzz` does.
#
# Go 1.26's fuzzing coordinator can report a bare "context deadline
# exceeded" when a duration -fuzztime runs out while a worker is mid-call
# (golang/go#75804, fixed in Go 1.27): no input failed and none was saved.
# Such a run, and only such a run, is run again once, for as many inputs as
# the first one got through ("Nx"): a count has no deadline to race, so the
# retry cannot hit it again. Any failure of the retry fails the run.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# coordinator_race LOG: true when the log of a failed `go test -fuzz` shows
# only the coordinator's shutdown race: the deadline line and no saved input,
# panic or test failure line.
coordinator_race() {
  grep -qx '    context deadline exceeded' "$1" &&
    ! grep -qE 'Failing input written to|^panic:|^\s+[A-Za-z0-9_]+\.go:[0-9]+:' "$1"
}

# retry_budget LOG: the -fuzztime for the retry: the inputs the raced run
# executed, as "Nx", or FUZZTIME when its log shows no count.
retry_budget() {
  local n
  n=$(grep -oE 'execs: [0-9]+' "$1" | tail -n 1 | grep -oE '[0-9]+' || true)
  if [[ -n $n && $n -gt 0 ]]; then
    echo "${n}x"
  else
    echo "${FUZZTIME}"
  fi
}

# For hack/fuzz_test.sh: --classify LOG exits 0 when the log is the race;
# --budget LOG prints the retry's -fuzztime.
case ${1:-} in
--classify)
  coordinator_race "$2"
  exit
  ;;
--budget)
  FUZZTIME=${FUZZTIME:-20s} retry_budget "$2"
  exit
  ;;
esac

GO=${GO:-go}
FUZZTIME=${FUZZTIME:?set FUZZTIME, e.g. 20s}
log=$(mktemp)
trap 'rm -f "${log}"' EXIT

ran=0
# Listed from the source, which is much faster than `go test -list` over
# every package.
while IFS=: read -r file line; do
  target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  pkg=./$(dirname "$file")
  budget=$FUZZTIME
  for attempt in 1 2; do
    echo "fuzzing $pkg $target for $budget"
    if $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" "$pkg" 2>&1 | tee "${log}"; then
      break
    fi
    if [[ $attempt -eq 1 ]] && coordinator_race "${log}"; then
      budget=$(retry_budget "${log}")
      echo "$target: the fuzzing coordinator's deadline race (golang/go#75804), no input failed; running it again for $budget"
      continue
    fi
    exit 1
  done
  ran=$((ran + 1))
done < <(grep -rn --include='*_test.go' '^func Fuzz' cmd pkg test | cut -d: -f1,3- | sort)
if [[ $ran -eq 0 ]]; then
  echo "no fuzz target found" >&2
  exit 1
fi
echo "$ran fuzz targets ran for $FUZZTIME each"
