#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Self-test of hack/verify-actions-pinned.sh: builds scratch git
# repositories with pinned and unpinned actions and checks that the script
# passes or fails on each, naming the right lines. Exits non-zero when any
# case does not behave as expected.
set -o errexit -o nounset -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=${here}/verify-actions-pinned.sh
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
failures=0

sha=0123456789abcdef0123456789abcdef01234567
digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef

# new_repo creates a repository whose workflow pins every action, and
# prints its path.
new_repo() {
  local repo
  repo=$(mktemp -d "${scratch}/repo.XXXXXX")
  mkdir -p "${repo}/.github/workflows" "${repo}/.github/actions/setup"
  git -C "${repo}" init -q
  cat >"${repo}/.github/workflows/release.yml" <<YAML
jobs:
  release:
    steps:
      - uses: actions/checkout@${sha} # v5.1.0
        with:
          fetch-depth: 0
      - name: A step with a name first
        uses: "actions/setup-go@${sha}"  # v6.5.0
      - uses: github/codeql-action/init@${sha} # v3.29.0-rc.1
      - uses: ./.github/actions/setup
      - uses: docker://alpine@${digest}
      - run: echo "uses: actions/checkout@v4 in a script is no step"
YAML
  cat >"${repo}/.github/actions/setup/action.yml" <<YAML
runs:
  using: composite
  steps:
    - uses: actions/cache@${sha} # v4.2.3
YAML
  git -C "${repo}" add -A
  echo "${repo}"
}

# expect WANT_STATUS NAME REPO [LINE...]: runs the script and checks its
# exit status; with status 1, each LINE must be a line of its output, and
# its output must have no other "FILE:LINE: PROBLEM" lines.
expect() {
  local want=$1 name=$2 repo=$3
  shift 3
  local out got=0
  out=$("${script}" -C "${repo}" 2>&1) || got=$?
  if [[ ${got} -ne ${want} ]]; then
    echo "FAIL ${name}: exit status ${got}, want ${want}; output:"
    echo "${out}" | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  local line
  for line in "$@"; do
    if ! grep -qxF -- "${line}" <<<"${out}"; then
      echo "FAIL ${name}: output lacks '${line}'; output:"
      echo "${out}" | sed 's/^/    /'
      failures=$((failures + 1))
      return
    fi
  done
  if [[ ${want} -eq 1 && $(grep -cE '^[^ ]+:[0-9]+: ' <<<"${out}") -ne $# ]]; then
    echo "FAIL ${name}: output names other lines too; output:"
    echo "${out}" | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  echo "ok   ${name}"
}

not_pinned="is not pinned to a commit (owner/repo@<40 hex digits> # vX.Y.Z)"
wf=.github/workflows/release.yml

repo=$(new_repo)
expect 0 "commits with their tags, local actions, images by digest and scripts pass" "${repo}"

repo=$(new_repo)
cat >>"${repo}/${wf}" <<'YAML'
      - uses: actions/checkout@v4
      - uses: sigstore/cosign-installer@main
      - uses: 'anchore/sbom-action@0123456'
YAML
git -C "${repo}" add -A
expect 1 "a tag, a branch and a short commit fail, each named with its line" "${repo}" \
  "${wf}:13: actions/checkout@v4 ${not_pinned}" \
  "${wf}:14: sigstore/cosign-installer@main ${not_pinned}" \
  "${wf}:15: anchore/sbom-action@0123456 ${not_pinned}"

repo=$(new_repo)
printf '      - uses: actions/upload-artifact@%s\n      - uses: actions/download-artifact@%s # latest\n' "${sha}" "${sha}" >>"${repo}/${wf}"
git -C "${repo}" add -A
expect 1 "a commit without the tag it is fails" "${repo}" \
  "${wf}:13: actions/upload-artifact@${sha} does not name its tag in a comment (# vX.Y.Z)" \
  "${wf}:14: actions/download-artifact@${sha} does not name its tag in a comment (# vX.Y.Z)"

repo=$(new_repo)
printf '      - uses: actions/checkout\n      - uses: docker://alpine:3.20\n' >>"${repo}/${wf}"
git -C "${repo}" add -A
expect 1 "no reference at all, and an image by tag, fail" "${repo}" \
  "${wf}:13: actions/checkout ${not_pinned}" \
  "${wf}:14: docker://alpine:3.20 is not pinned to an image digest (docker://image@sha256:<64 hex digits>)"

repo=$(new_repo)
printf 'jobs:\n  ci:\n    steps:\n      - uses: actions/checkout@v4\n' >"${repo}/.github/workflows/ci.yaml"
printf '    - uses: actions/cache@v4\n' >>"${repo}/.github/actions/setup/action.yml"
git -C "${repo}" add -A
expect 1 "a .yaml workflow and a local action's own steps are checked too" "${repo}" \
  ".github/workflows/ci.yaml:4: actions/checkout@v4 ${not_pinned}" \
  ".github/actions/setup/action.yml:5: actions/cache@v4 ${not_pinned}"

repo=$(new_repo)
printf 'jobs:\n  x:\n    steps:\n      - uses: actions/checkout@v4\n' >"${repo}/.github/workflows/untracked.yml"
expect 0 "untracked files are not checked" "${repo}"

if [[ ${failures} -gt 0 ]]; then
  echo "${failures} case(s) failed" >&2
  exit 1
fi
echo "all cases passed"
