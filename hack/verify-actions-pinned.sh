#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when a GitHub Actions workflow runs an action that is not pinned to
# a commit. A tag (v4) or a branch names whatever its owner points it at
# next, and the release workflow hands every step its secrets, its token
# with write access to the packages and a signing identity. So every
# `uses:` of .github/workflows/*.yml (and *.yaml), and of
# .github/actions/*/action.yml, must be one of:
#
#   owner/repo[/path]@<40 hex digits>  # vX.Y.Z   a commit, and the tag it is
#                                                 (for people and for
#                                                 Dependabot)
#   ./path                                        an action of this repository
#   docker://image@sha256:<64 hex digits>         an image, by digest
#
# Only tracked files are checked (git ls-files), as in a fresh clone.
#
# Usage: hack/verify-actions-pinned.sh [-C DIR]
#
#   -C DIR  check the git repository at DIR instead of the one holding this
#           script (the self-test runs it on a scratch repository).
#
# Output: one line per problem, "FILE:LINE: PROBLEM", then a summary on
# stderr; exit status 1. Exit status 0 when every action is pinned, 2 on a
# usage error.
set -o errexit -o nounset -o pipefail

# shellcheck source=hack/lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
check_root_only "$0 [-C DIR]" "$@"

problems=()
uses_re='^[[:space:]]*(-[[:space:]]+)?uses:[[:space:]]*(.*)$'
pinned_re='^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@[:space:]]+)?@[0-9a-f]{40}$'
tag_re='^#[[:space:]]*v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$'
docker_re='^docker://[^@[:space:]]+@sha256:[0-9a-f]{64}$'

while IFS= read -r -d '' f; do
  [[ -f ${f} ]] || continue # deleted in the working tree
  n=0
  while IFS= read -r line || [[ -n ${line} ]]; do
    n=$((n + 1))
    [[ ${line} =~ ${uses_re} ]] || continue
    rest=${BASH_REMATCH[2]}
    # The reference, unquoted, and what follows it on the line.
    ref=${rest%%[[:space:]]*}
    comment=${rest#"${ref}"}
    comment=${comment#"${comment%%[![:space:]]*}"}
    ref=${ref#[\"\']}
    ref=${ref%[\"\']}
    case "${ref}" in
      ./*) continue ;;
      docker://*)
        [[ ${ref} =~ ${docker_re} ]] ||
          problems+=("${f}:${n}: ${ref} is not pinned to an image digest (docker://image@sha256:<64 hex digits>)")
        continue
        ;;
    esac
    if [[ ! ${ref} =~ ${pinned_re} ]]; then
      problems+=("${f}:${n}: ${ref} is not pinned to a commit (owner/repo@<40 hex digits> # vX.Y.Z)")
    elif [[ ! ${comment} =~ ${tag_re} ]]; then
      problems+=("${f}:${n}: ${ref} does not name its tag in a comment (# vX.Y.Z)")
    fi
  done <"${f}"
done < <(git -c core.quotePath=false ls-files -z -- '.github/workflows/*.yml' '.github/workflows/*.yaml' \
  '.github/actions/*/action.yml' '.github/actions/*/action.yaml')

if [[ ${#problems[@]} -eq 0 ]]; then
  exit 0
fi
printf '%s\n' "${problems[@]}"
echo "${#problems[@]} action(s) not pinned to a commit (see hack/verify-actions-pinned.sh)" >&2
exit 1
