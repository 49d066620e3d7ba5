#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when the repository's license, or a file's license header, is
# missing or not what the convention says (CONTRIBUTING.md):
#
#   LICENSE                 tracked, at the root: the Apache License 2.0 verbatim
#                           (the text of apache.org's LICENSE-2.0.txt, which
#                           k8s.io's modules carry; checked by its SHA-256).
#   Go files written by     start with exactly these two lines, then a blank
#   hand                    line (which keeps them out of the package's doc
#                           comment); a //go:build line comes after it:
#                               // Copyright The caliban-operator Authors.
#                               // SPDX-License-Identifier: Apache-2.0
#   shell scripts under     carry the same two lines as '#' comments right
#   hack/ and .ci/          after the shebang (as their first two lines when
#                           they have none).
#   hack/boilerplate.go.txt the header k8s.io/code-generator writes into the
#                           Go code it generates: carries both lines' text.
#
# Generated Go files are left to their generator: every file under
# pkg/generated/, and every file with Go's marker line
# "// Code generated ... DO NOT EDIT." before its package clause (the
# zz_generated files of pkg/apis). Go files under a testdata/ directory are
# data, not code, and are skipped. A shell script is a file ending in .sh,
# or one whose first line is a shebang naming sh, bash, dash, ksh or zsh.
#
# Only tracked files are checked (git ls-files), as in a fresh clone; their
# content is read from the working tree.
#
# Usage: hack/verify-headers.sh [-C DIR]
#
#   -C DIR  check the git repository at DIR instead of the one holding this
#           script (the self-test runs it on a scratch repository).
#
# Output: one line per problem, "FILE: PROBLEM", then a summary on stderr;
# exit status 1. Exit status 0 when everything carries its header, 2 on a
# usage error.
set -o errexit -o nounset -o pipefail

# shellcheck source=hack/lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
check_root_only "$0 [-C DIR]" "$@"

copyright='Copyright The caliban-operator Authors.'
spdx='SPDX-License-Identifier: Apache-2.0'
# sha256sum of https://www.apache.org/licenses/LICENSE-2.0.txt.
apache_sha256=cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30

problems=()
problem() { problems+=("$1: $2"); }

# The license.
if [[ ! -f LICENSE ]] || ! git ls-files --error-unmatch -- LICENSE >/dev/null 2>&1; then
  problem LICENSE "missing (or not tracked): the Apache License 2.0 text belongs at the repository root"
elif [[ $(sha256sum <LICENSE | cut -d' ' -f1) != "${apache_sha256}" ]]; then
  problem LICENSE "not the Apache License 2.0 verbatim (apache.org's LICENSE-2.0.txt)"
fi

# The header of generated code.
if [[ -f hack/boilerplate.go.txt ]]; then
  for fact in "${copyright}" "${spdx}"; do
    if ! grep -qF -- "${fact}" hack/boilerplate.go.txt; then
      problem hack/boilerplate.go.txt "lacks '${fact}' (the header of generated Go code)"
    fi
  done
fi

# generated FILE: whether Go's generated-code marker comes before the
# package clause.
generated() {
  local line
  while IFS= read -r line || [[ -n ${line} ]]; do
    [[ ${line} =~ ^package[[:space:]] ]] && return 1
    [[ ${line} =~ ^//\ Code\ generated\ .*\ DO\ NOT\ EDIT\.$ ]] && return 0
  done <"$1"
  return 1
}

while IFS= read -r -d '' f; do
  [[ -f ${f} ]] || continue # deleted in the working tree
  case "${f}" in
    pkg/generated/* | testdata/* | */testdata/*) continue ;;
  esac
  generated "${f}" && continue
  l1='' l2='' l3=''
  { IFS= read -r l1 || true; IFS= read -r l2 || true; IFS= read -r l3 || true; } <"${f}"
  if [[ ${l1} != "// ${copyright}" || ${l2} != "// ${spdx}" ]]; then
    problem "${f}" "does not start with the license header ('// ${copyright}', '// ${spdx}')"
  elif [[ -n ${l3} ]]; then
    problem "${f}" "the license header is not followed by a blank line"
  fi
done < <(git -c core.quotePath=false ls-files -z -- '*.go')

while IFS= read -r -d '' f; do
  [[ -f ${f} ]] || continue
  l1='' l2='' l3=''
  { IFS= read -r l1 || true; IFS= read -r l2 || true; IFS= read -r l3 || true; } <"${f}"
  shebang=false
  if [[ ${l1} == '#!'* ]]; then
    [[ ${l1} =~ ^#!.*[/[:space:]](ba|da|k|z)?sh([[:space:]].*)?$ ]] || continue # not a shell script
    shebang=true
  elif [[ ${f} != *.sh ]]; then
    continue
  fi
  if [[ ${shebang} == true ]]; then
    a=${l2} b=${l3} where="right after the shebang"
  else
    a=${l1} b=${l2} where="as its first two lines"
  fi
  if [[ ${a} != "# ${copyright}" || ${b} != "# ${spdx}" ]]; then
    problem "${f}" "lacks the license header ${where} ('# ${copyright}', '# ${spdx}')"
  fi
done < <(git -c core.quotePath=false ls-files -z -- hack .ci)

if [[ ${#problems[@]} -eq 0 ]]; then
  exit 0
fi
printf '%s\n' "${problems[@]}"
echo "${#problems[@]} file(s) without their license or license header (see hack/verify-headers.sh for the convention)" >&2
exit 1
