#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when docs/architecture.md's map of the code, its section
# "## Where the code lives", no longer matches the tree: when a directory
# under pkg/ or cmd/ that holds Go files is not named there, when the
# section names a path under pkg/ or cmd/ that does not exist, or when its
# list of arrows (which room imports which) is not what the packages
# import.
#
# Usage: hack/verify-code-map.sh [-C DIR]
#
#   -C DIR  check the git repository at DIR instead of the one holding this
#           script (the self-test runs it on a scratch repository).
#
# The rules:
#
#   - The section runs from its heading to the next level-2 heading ("## "),
#     its subsections included. Fenced code blocks are skipped by the path
#     rules, the picture of the rooms among them, except the arrows list.
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
# The arrows:
#
#   - The box-drawn picture of the rooms is for the eye and is not read: a
#     layered drawing cannot show every direct import without a tangle, and
#     a 2-D parse of it would be fragile. What is checked is the section's
#     arrows list, the one fenced block whose info string is "arrows"
#     (```arrows). The picture must agree with it by eye.
#   - Each line of the list is "ROOM ──► ROOM, ROOM ..." (the targets
#     separated by commas or blanks; "->" may stand for "──►"), or a room
#     alone, for one that imports no other room. Text from a '#' on is a
#     comment; blank lines are ignored. A room is a path under pkg/ or cmd/
#     as above, and must be a directory holding tracked files.
#   - A room is a package tree: a package belongs to the longest room that
#     is its directory or an ancestor of it, so `pkg/operator/freshness`
#     and `pkg/operator` are two rooms and pkg/operator/tracing/otlp is in
#     `pkg/operator/tracing` when that is a room. Every package that holds
#     tracked Go files must be in a room.
#   - The imports are the direct, non-test ones, as
#     go list -deps=false -f '{{.ImportPath}} {{join .Imports " "}}' \
#       ./pkg/... ./cmd/...
#     prints them, of the packages whose directory holds tracked Go files;
#     imports outside the module, and within one room, do not count.
#   - For every two rooms A and B, the list must have the arrow A ──► B if
#     and only if some package in A imports a package in B. A missing arrow
#     is reported with one import that needs it; an extra one with its line.
#
# Only tracked files count (git ls-files), as in a fresh clone, like
# hack/verify-doc-refs.sh: a new package fails the check once it is added.
#
# Output: one line per problem (a missing or extra arrow is one line each),
# then a summary on stderr; exit status 1. Exit status 0 when the map
# matches, 2 on a usage error.
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

# The imports, as "package import..." with the module's path cut off.
module=$(awk '$1 == "module" { print $2; exit }' go.mod 2>/dev/null || true)
if [[ -z ${module} ]]; then
  echo "go.mod: no module line; the arrows of ${doc} are checked against the module's imports"
  echo "the imports could not be read (see hack/verify-code-map.sh)" >&2
  exit 1
fi
if ! go list -deps=false -f '{{.ImportPath}} {{join .Imports " "}}' ./pkg/... ./cmd/... >"${tmp}/imports" 2>"${tmp}/golist"; then
  sed 's/^/go list: /' "${tmp}/golist"
  echo "go list failed; the arrows of ${doc} are checked against its imports" >&2
  exit 1
fi

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
/^[ \t]*(```|~~~)/ {
  if (!fence && $0 ~ /^[ \t]*(```|~~~)[ \t]*arrows[ \t]*$/) { arrows = 1; lists++ }
  else arrows = 0
  fence = !fence
  next
}
arrows { arrowline(); next }
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

# room_path checks one room of the arrows list; 1 when it is good.
function room_path(r) {
  if (r !~ /^(pkg|cmd)(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$/) {
    printf "%s:%d: \"%s\": not a room (a path under pkg/ or cmd/) in the arrows list\n", doc, FNR, r
    bad++
    return 0
  }
  if (!(r in isdir)) {
    printf "%s:%d: %s: a room of the arrows list but not a directory in the repository\n", doc, FNR, r
    bad++
    return 0
  }
  if (!(r in rooms)) { rooms[r] = 1; roomorder[++nrooms] = r }
  return 1
}

# arrowline reads one line of the arrows list: "FROM ──► TO, TO ..." or
# "ROOM".
function arrowline(   t, from, n, i, to, k) {
  t = $0
  sub(/#.*/, "", t)
  gsub(/──►|->/, " \001 ", t)
  gsub(/,/, " ", t)
  n = split(t, w, /[ \t]+/)
  k = 0
  for (i = 1; i <= n; i++) if (w[i] != "") v[++k] = w[i]
  if (k == 0) return
  from = v[1]
  if (from == "\001" || (k > 1 && v[2] != "\001") || (k == 2)) {
    printf "%s:%d: not an arrow of the list (\"ROOM ──► ROOM, ...\" or \"ROOM\")\n", doc, FNR
    bad++
    return
  }
  if (!room_path(from)) return
  for (i = 3; i <= k; i++) {
    to = v[i]
    if (to == "\001") {
      printf "%s:%d: not an arrow of the list (one \"──►\" a line)\n", doc, FNR
      bad++
      return
    }
    if (!room_path(to)) continue
    if (to == from) {
      printf "%s:%d: %s ──► %s: an arrow from a room to itself\n", doc, FNR, from, to
      bad++
      continue
    }
    if (!((from, to) in drawn)) { drawn[from, to] = FNR; edgeorder[++nedges] = from SUBSEP to }
  }
}

# roomof is the longest room that is the package's directory or holds it,
# or "".
function roomof(p,   a) {
  a = p
  while (1) {
    if (a in rooms) return a
    if (!sub(/\/[^\/]*$/, "", a)) return ""
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
  if (lists != 1) {
    printf "%s: \"%s\" has %d arrows lists (```arrows), not one\n", doc, section, lists
    exit 1
  }
  prefix = module "/"
  while ((getline line < imports) > 0) {
    m = split(line, w, / +/)
    if (index(w[1], prefix) != 1) continue
    p = substr(w[1], length(prefix) + 1)
    if (!(p in needed)) continue
    rp = roomof(p)
    if (rp == "") {
      printf "%s: a package in no room of %s's arrows list\n", p, doc
      bad++
      continue
    }
    for (j = 2; j <= m; j++) {
      if (index(w[j], prefix) != 1) continue
      q = substr(w[j], length(prefix) + 1)
      if (!(q in needed)) continue
      rq = roomof(q)
      if (rq == "" || rq == rp) continue
      if (!((rp, rq) in real)) real[rp, rq] = p " imports " q
    }
  }
  for (e in real) {
    if (e in drawn) continue
    split(e, ab, SUBSEP)
    printf "%s: missing arrow %s ──► %s: %s\n", doc, ab[1], ab[2], real[e]
    bad++
  }
  for (i = 1; i <= nedges; i++) {
    e = edgeorder[i]
    if (e in real) continue
    split(e, ab, SUBSEP)
    printf "%s:%d: extra arrow %s ──► %s: no package in %s imports one in %s\n", doc, drawn[e], ab[1], ab[2], ab[1], ab[2]
    bad++
  }
  exit bad > 0
}
AWK

if awk -v tracked="${tmp}/tracked" -v imports="${tmp}/imports" -v module="${module}" \
  -v doc="${doc}" -v section="${section}" "${program}" "${doc}" >"${tmp}/report"; then
  exit 0
fi
LC_ALL=C sort "${tmp}/report"
echo "$(wc -l <"${tmp}/report") problem(s) with the map of the code in ${doc} (see hack/verify-code-map.sh for the rules)" >&2
exit 1
