#!/usr/bin/env bash
# Runs every Go fuzz target in the module for FUZZTIME each (a duration such
# as 20s, or Nx for N inputs), on top of its seed corpus. Targets are found,
# not listed here, so a new one is fuzzed without editing this script. A
# failing input is saved under the package's testdata/fuzz/ and fails the
# run, as `go test -fuzz` does.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:?set FUZZTIME, e.g. 20s}

ran=0
# Listed from the source, which is much faster than `go test -list` over
# every package.
while IFS=: read -r file line; do
  target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  pkg=./$(dirname "$file")
  echo "fuzzing $pkg $target for $FUZZTIME"
  $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  ran=$((ran + 1))
done < <(grep -rn --include='*_test.go' '^func Fuzz' cmd pkg test | cut -d: -f1,3- | sort)
if [[ $ran -eq 0 ]]; then
  echo "no fuzz target found" >&2
  exit 1
fi
echo "$ran fuzz targets ran for $FUZZTIME each"
