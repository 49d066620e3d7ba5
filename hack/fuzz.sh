#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME each (a duration such
# as 20s, or Nx for N inputs), on top of its seed corpus. Targets are found,
# not listed here, so a new one is fuzzed without editing this script. A
# failing input is saved under the package's testdata/fuzz/ and fails the
# run, as `go test -fuzz` does.
#
# Go 1.26's fuzzing coordinator can report a bare "context deadline
# exceeded" when -fuzztime runs out while a worker is mid-call
# (golang/go#75804, fixed in Go 1.27): no input failed and none was saved.
# Such a run, and only such a run, is retried once; a second one fails.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# coordinator_race LOG: true when the log of a failed `go test -fuzz` shows
# only the coordinator's shutdown race: the deadline line and no saved input,
# panic or test failure line.
coordinator_race() {
  grep -qx '    context deadline exceeded' "$1" &&
    ! grep -qE 'Failing input written to|^panic:|^\s+[A-Za-z0-9_]+\.go:[0-9]+:' "$1"
}

if [[ ${1:-} == --classify ]]; then
  # For hack/fuzz_test.sh: exit 0 when the log is the race.
  coordinator_race "$2"
  exit
fi

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
  for attempt in 1 2; do
    echo "fuzzing $pkg $target for $FUZZTIME"
    if $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "${log}"; then
      break
    fi
    if [[ $attempt -eq 1 ]] && coordinator_race "${log}"; then
      echo "$target: the fuzzing coordinator's deadline race (golang/go#75804), no input failed; running it again"
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
