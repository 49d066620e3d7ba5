#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Self-test of hack/verify-doc-refs.sh: builds scratch git repositories with
# good and bad citations and checks that the script passes or fails on each.
# Exits non-zero when any case does not behave as expected.
#
# File names are assembled from ${md} so that this file cites nothing
# itself (the script under test also checks this file).
set -o errexit -o nounset -o pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/verify-doc-refs.sh
md=md
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
failures=0

# new_repo creates a repository whose docs and code cite each other
# correctly, and prints its path.
new_repo() {
  local repo
  repo=$(mktemp -d "${scratch}/repo.XXXXXX")
  mkdir -p "${repo}/docs/adr" "${repo}/pkg"
  git -C "${repo}" init -q
  printf '# Guide\nSee [the reference](reference.%s#fields), docs/reference.%s and reference.%s.\nDecisions: [adr](adr), [one](adr/0001-x.%s).\nUpstream: https://example.com/elsewhere/README.%s and [theirs](https://example.com/x.%s).\nSection [link](#guide), mail [me](mailto:a@b.c).\n' \
    "${md}" "${md}" "${md}" "${md}" "${md}" "${md}" >"${repo}/docs/guide.${md}"
  printf '# Reference\nBack to [the guide](../docs/guide.%s).\n' "${md}" >"${repo}/docs/reference.${md}"
  printf '# ADR 1\nSee [the guide](../guide.%s).\n' "${md}" >"${repo}/docs/adr/0001-x.${md}"
  printf 'package pkg\n\n// Rules: docs/reference.%s#fields.\nvar m = map[string]func(int){}\n\nfunc f() { m["a"](1) }\n' "${md}" >"${repo}/pkg/a.go"
  git -C "${repo}" add -A
  echo "${repo}"
}

# expect WANT_STATUS NAME REPO [ARGS...]: runs the script and checks its
# exit status; with status 1, the next arguments up to "--" are lines its
# output must contain.
expect() {
  local want=$1 name=$2 repo=$3
  shift 3
  local must=()
  while [[ $# -gt 0 && $1 != "--" ]]; do
    must+=("$1")
    shift
  done
  [[ $# -gt 0 ]] && shift
  local out got=0
  out=$("${script}" -C "${repo}" "$@" 2>&1) || got=$?
  if [[ ${got} -ne ${want} ]]; then
    echo "FAIL ${name}: exit status ${got}, want ${want}; output:"
    echo "${out}" | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  local line
  for line in "${must[@]}"; do
    if ! grep -qxF -- "${line}" <<<"${out}"; then
      echo "FAIL ${name}: output lacks '${line}'; output:"
      echo "${out}" | sed 's/^/    /'
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok   ${name}"
}

repo=$(new_repo)
expect 0 "good citations, links, directories, URLs and anchors pass" "${repo}" --

repo=$(new_repo)
printf 'package pkg\n\n// See the product specification, spec.%s section 3.\n' "${md}" >"${repo}/pkg/b.go"
git -C "${repo}" add -A
expect 1 "a bare name no tracked file has fails" "${repo}" "pkg/b.go:3: spec.${md}" --

repo=$(new_repo)
printf '# x\nSee [launch](../../shared/launch.%s#flags).\n' "${md}" >"${repo}/docs/bad.${md}"
git -C "${repo}" add -A
expect 1 "a relative link leaving the repository fails" "${repo}" "docs/bad.${md}:2: ../../shared/launch.${md}" --

repo=$(new_repo)
printf '# x\nThe [manifest](../manifests/missing.yaml) and [ok](../pkg/a.go).\n' >"${repo}/docs/bad.${md}"
git -C "${repo}" add -A
expect 1 "a link to a missing non-Markdown file fails" "${repo}" "docs/bad.${md}:2: ../manifests/missing.yaml" --

repo=$(new_repo)
printf '# x\nSee [guide](docs/guide.%s).\n' "${md}" >"${repo}/docs/bad.${md}"
git -C "${repo}" add -A
expect 1 "a Markdown link resolves from the citing file's directory only" "${repo}" "docs/bad.${md}:2: docs/guide.${md}" --

repo=$(new_repo)
printf 'package pkg\n\n// docs/nowhere.%s\n' "${md}" >"${repo}/pkg/b.go"
git -C "${repo}" add -A
expect 0 "pathspecs restrict the citing files" "${repo}" -- '*.md'
expect 1 "without pathspecs the same repository fails" "${repo}" "pkg/b.go:3: docs/nowhere.${md}" --

repo=$(new_repo)
printf 'package pkg\n\n// docs/untracked.%s\n' "${md}" >"${repo}/pkg/b.go"
printf '# untracked\n' >"${repo}/docs/untracked.${md}"
git -C "${repo}" add pkg/b.go
expect 1 "an untracked file does not resolve a citation" "${repo}" "pkg/b.go:3: docs/untracked.${md}" --

repo=$(new_repo)
mkdir -p "${repo}/bin" "${repo}/hack/tools"
printf 'x missing.%s\n' "${md}" >"${repo}/bin/note.txt"
printf 'example.com/m v1.0.0/missing.%s h1:x\n' "${md}" >"${repo}/hack/tools/go.sum"
printf 'x\000y missing.%s\n' "${md}" >"${repo}/blob.dat"
printf 'Not Markdown: x.%sx, y.%s.bak, spec.%s.  verify-doc-refs: ignore\n' "${md}" "${md}" "${md}" >"${repo}/notes.txt"
git -C "${repo}" add -A -f
expect 0 "bin/, go.sum, binary files, other extensions and ignored lines are skipped" "${repo}" --

repo=$(new_repo)
printf 'End of a sentence: see missing.%s. Next.\n' "${md}" >"${repo}/notes.txt"
git -C "${repo}" add -A
expect 1 "a citation at the end of a sentence is still a citation" "${repo}" "notes.txt:1: missing.${md}" --

if [[ ${failures} -gt 0 ]]; then
  echo "${failures} case(s) failed" >&2
  exit 1
fi
echo "all cases passed"
