#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Self-test of hack/phase.sh: a phase's time and go test's package lines are
# logged, the command's output and exit status pass through, and the summary
# lists them. Exits non-zero on any difference.
set -o errexit -o nounset -o pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/phase.sh
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
log=${scratch}/phases.log
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A go test that passes one package and fails another.
cat >"${scratch}/fake-go-test" <<'FAKE'
#!/usr/bin/env bash
printf 'ok  \tgithub.com/o/r/test/integration/api\t9.000s\n'
printf -- '--- FAIL: TestX (1.00s)\n'
printf 'FAIL\tgithub.com/o/r/test/faults\t127.400s\n'
exit 1
FAKE
chmod +x "${scratch}/fake-go-test"

out=$("${script}" "${log}" integration --per-package -- "${scratch}/fake-go-test" 2>&1) && status=0 || status=$?
[[ $status -eq 1 ]] || fail "a failing command's status is ${status}, want 1"
grep -q -- '--- FAIL: TestX' <<<"${out}" || fail "the command's output did not pass through: ${out}"
grep -qx 'integration github.com/o/r/test/integration/api 9.000' "${log}" || fail "no row for the passing package: $(cat "${log}")"
grep -qx 'integration github.com/o/r/test/faults 127.400' "${log}" || fail "no row for the failing package: $(cat "${log}")"
grep -qE '^integration [0-9]+\.[0-9]$' "${log}" || fail "no phase time: $(cat "${log}")"

"${script}" "${log}" unit -- true >/dev/null || fail "a passing command failed the phase"
grep -qE '^unit [0-9]+\.[0-9]$' "${log}" || fail "no time for a phase without packages: $(cat "${log}")"

summary=$("${script}" "${log}" --summary)
for want in 'Where the time went' 'integration' ' test/faults ' 'unit' 'total'; do
  grep -q -- "${want}" <<<"${summary}" || fail "the summary does not show ${want}: ${summary}"
done
# The package rows stand under their phase, not after the last one.
[[ $(grep -n ' test/faults ' <<<"${summary}" | cut -d: -f1) -lt $(grep -n '^  unit' <<<"${summary}" | cut -d: -f1) ]] ||
  fail "package rows are not under their phase: ${summary}"

[[ -z $("${script}" "${scratch}/none.log" --summary) ]] || fail "a summary without a log printed something"

if ((failures > 0)); then
  exit 1
fi
echo "phase.sh: ok"
