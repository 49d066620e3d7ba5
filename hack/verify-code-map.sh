#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when docs/architecture.md's map of the code, its section
# "## Where the code lives", no longer matches the tree: when a directory
# under pkg/ or cmd/ that holds Go files is not named there, or when the
# section names a path under pkg/ or cmd/ that does not exist.
#
# Usage: hack/verify-code-map.sh [-C DIR]
#
#   -C DIR  check the git repository at DIR instead of the one holding this
#           script (the self-test runs it on a scratch repository).
#
# The rules:
#
#   - The section runs from its heading to the next level-2 heading ("## "),
#     its subsections included. Fenced code blocks (the diagram) are skipped.
#   - A path is named when it appears as a whole inline code span: `pkg/x`
#     or `pkg/x/` for a directory, `pkg/x/file.go` for a file. Every span
#     that is a path under pkg/ or cmd/ (segments of letters, digits, '_',
#     '.' and '-', not starting with '.') must name a tracked file or a
#     directory holding tracked files.
#   - Every directory under pkg/ or cmd/ that directly holds a tracked .go
#     file must be covered, except testdata/ directories and what is below
#     them (data, not packages). A directory is covered when it is named
#     itself, or, for a directory under pkg/generated/, when an ancestor
#     strictly below pkg/generated is named: a generated tree may be named
#     at its root (`pkg/generated/clientset` covers
#     pkg/generated/clientset/versioned/fake), but naming `pkg/generated`
#     alone covers nothing, so the map says what each tree is. A parent
#     outside pkg/generated never covers its children: each hand-written
#     package has a line of its own.
#
# Only tracked files count (git ls-files), as in a fresh clone, like
# hack/verify-doc-refs.sh: a new package fails the check once it is added.
#
# Output: one line per problem, then a summary on stderr; exit status 1.
# Exit status 0 when the map matches, 2 on a usage error.
set -o errexit -o nounset -o pipefail

# shellcheck source=hack/lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
check_root_only "$0 [-C DIR]" "$@"

doc=docs/architecture.md
section="Where the code lives"
if [[ ! -f ${doc} ]]; then
  echo "${doc}: missing; it holds the map of the code (\"## ${section}\")"
  echo "the map of the code is missing (see hack/verify-code-map.sh)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
git -c core.quotePath=false ls-files -- pkg cmd >"${tmp}/tracked"

# The awk program is POSIX (mawk runs it).
read -r -d '' program <<'AWK' || true
BEGIN {
  while ((getline f < tracked) > 0) {
    exists[f] = 1
    d = f
    while (sub(/\/[^\/]*$/, "", d)) isdir[d] = 1
    if (f !~ /\.go$/ || f ~ /(^|\/)testdata\//) continue
    d = f
    sub(/\/[^\/]*$/, "", d)
    if (!(d in needed)) { needed[d] = 1; order[++n] = d }
  }
  bad = 0
}

$0 ~ ("^## " section "[ \t]*$") { insection = 1; found = 1; next }
/^## / { insection = 0; next }
!insection { next }
/^[ \t]*(```|~~~)/ { fence = !fence; next }
fence { next }
{
  t = $0
  while (match(t, /`[^`]+`/)) {
    tok = substr(t, RSTART + 1, RLENGTH - 2)
    t = substr(t, RSTART + RLENGTH)
    if (tok !~ /^(pkg|cmd)(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)+\/?$/) continue
    sub(/\/$/, "", tok)
    named[tok] = 1
    if (!(tok in exists) && !(tok in isdir)) {
      printf "%s:%d: %s: named in \"%s\" but not in the repository\n", doc, FNR, tok, section
      bad++
    }
  }
}

function covered(d,   a) {
  if (d in named) return 1
  if (d !~ /^pkg\/generated\//) return 0
  a = d
  while (sub(/\/[^\/]*$/, "", a) && a != "pkg/generated") if (a in named) return 1
  return 0
}

END {
  if (!found) {
    printf "%s: has no section \"## %s\", the map of the code\n", doc, section
    exit 1
  }
  for (i = 1; i <= n; i++) {
    if (covered(order[i])) continue
    printf "%s: holds Go files but is not named in %s's \"%s\"\n", order[i], doc, section
    bad++
  }
  exit bad > 0
}
AWK

if awk -v tracked="${tmp}/tracked" -v doc="${doc}" -v section="${section}" "${program}" "${doc}" >"${tmp}/report"; then
  exit 0
fi
LC_ALL=C sort "${tmp}/report"
echo "$(wc -l <"${tmp}/report") problem(s) with the map of the code in ${doc} (see hack/verify-code-map.sh for the rules)" >&2
exit 1
