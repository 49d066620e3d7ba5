#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Self-test of hack/fuzz.sh's classifier: only a bare coordinator deadline,
# with no saved input and no failure line, counts as the Go 1.26 race that
# earns a retry, and the retry runs for the inputs the raced run executed.
# Exits non-zero when any log is read wrongly.
set -o errexit -o nounset -o pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/fuzz.sh
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
failures=0

# expect WANT NAME: classifies the log on stdin; WANT is race or failure.
expect() {
  local want=$1 name=$2 got=failure
  cat >"${scratch}/log"
  if "${script}" --classify "${scratch}/log"; then got=race; fi
  if [[ $got != "$want" ]]; then
    echo "FAIL: ${name}: classified as ${got}, want ${want}"
    failures=$((failures + 1))
  fi
}

expect race "a bare deadline at the end of -fuzztime" <<'LOG'
fuzz: elapsed: 20s, execs: 65891 (2931/sec), new interesting: 0 (total: 14)
--- FAIL: FuzzEnvNameAgreesWithPods (20.34s)
    context deadline exceeded
FAIL
exit status 1
LOG

expect failure "a failing input that was saved" <<'LOG'
--- FAIL: FuzzX (3.10s)
    --- FAIL: FuzzX (0.00s)
        x_test.go:12: got 1, want 2

    Failing input written to testdata/fuzz/FuzzX/582528ddfad69eb5
    To re-run:
    go test -run=FuzzX/582528ddfad69eb5
FAIL
LOG

expect failure "a seed that fails before fuzzing starts" <<'LOG'
--- FAIL: FuzzX (0.01s)
    --- FAIL: FuzzX/seed#0 (0.00s)
        x_test.go:40: context deadline exceeded
FAIL
LOG

expect failure "a panic" <<'LOG'
panic: runtime error: index out of range [3] with length 3
FAIL
LOG

expect failure "a build error" <<'LOG'
# example.com/p
./x_test.go:3:2: undefined: y
FAIL	example.com/p [build failed]
LOG

# expect_budget WANT NAME: the retry's -fuzztime for the log on stdin.
expect_budget() {
  local want=$1 name=$2 got
  cat >"${scratch}/log"
  got=$(FUZZTIME=20s "${script}" --budget "${scratch}/log")
  if [[ $got != "$want" ]]; then
    echo "FAIL: ${name}: retry budget ${got}, want ${want}"
    failures=$((failures + 1))
  fi
}

expect_budget 65891x "the raced run's last count of inputs" <<'LOG'
fuzz: elapsed: 3s, execs: 8007 (2669/sec), new interesting: 0 (total: 14)
fuzz: elapsed: 20s, execs: 65891 (2931/sec), new interesting: 0 (total: 14)
--- FAIL: FuzzEnvNameAgreesWithPods (20.34s)
    context deadline exceeded
LOG

expect_budget 20s "a log with no count keeps the duration" <<'LOG'
--- FAIL: FuzzX (20.00s)
    context deadline exceeded
LOG

if [[ $failures -gt 0 ]]; then
  exit 1
fi
echo "hack/fuzz.sh reads every log as expected"
