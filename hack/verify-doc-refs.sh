#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when a tracked file cites a file the repository does not have, so
# that every reference in the code and the docs can be followed from a
# fresh clone.
#
# Usage: hack/verify-doc-refs.sh [-C DIR] [-- PATHSPEC...]
#
#   -C DIR       check the git repository at DIR instead of the one holding
#                this script (the self-test runs it on a scratch repository).
#   PATHSPEC...  check only the citing files these git pathspecs select, for
#                example '*.md'. Citations are always resolved against every
#                tracked file.
#
# What counts as a citation, in every tracked text file except go.sum files
# and bin/:
#
#   (a) a token that names a Markdown file: letters, digits, '_', '-', '.'
#       and '/', ending in .md (an '#anchor' after it is ignored). It
#       resolves when a tracked file exists at that path relative to the
#       citing file's directory or to the repository root, or, for a name
#       without a '/', when any tracked file has that base name.
#   (b) in Markdown files, a link target '](TARGET)' that is a relative path
#       (not a URL, not mailto:, not a pure '#anchor'). It resolves when a
#       tracked file, or a directory holding tracked files, exists at TARGET
#       relative to the citing file's directory ('/...' means the repository
#       root). '#anchor' and '?query' parts are ignored.
#
# URLs (scheme://...) are removed from a line before it is searched, so a
# link to another repository's file is not a citation. A line containing
# the marker "verify-doc-refs: ignore" is skipped.
#
# Output: one line per unresolved citation, "FILE:LINE: NAME", then a
# summary on stderr; exit status 1. Exit status 0 when every citation
# resolves, 2 on a usage error.
set -o errexit -o nounset -o pipefail

# shellcheck source=hack/lib/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"
check_root "$0 [-C DIR] [-- PATHSPEC...]" "$@"
set -- "${ARGS[@]}"

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

# Every tracked file: what a citation may resolve to.
git -c core.quotePath=false ls-files >"${tmp}/tracked"

# Candidate lines of the citing files. -I skips binary files.
pathspecs=("$@")
if [[ ${#pathspecs[@]} -eq 0 ]]; then
  pathspecs=(.)
fi
status=0
git -c core.quotePath=false grep -n -I --no-color -E \
  -e '[A-Za-z0-9_-][.]md' -e '[]][(]' \
  -- "${pathspecs[@]}" ':(exclude,glob)**/go.sum' ':(exclude)bin/' >"${tmp}/lines" || status=$?
if [[ ${status} -gt 1 ]]; then
  echo "$0: git grep failed" >&2
  exit 2
fi

# The awk program is POSIX (mawk runs it): no \b, no intervals.
read -r -d '' program <<'AWK' || true
BEGIN {
  while ((getline f < tracked) > 0) {
    exists[f] = 1
    n = split(f, parts, "/")
    base[parts[n]] = 1
    d = f
    while (sub(/\/[^\/]*$/, "", d)) isdir[d] = 1
  }
  bad = 0
}

# normalize resolves "." and ".." and drops empty segments; a path that
# climbs above the root becomes a name no file has.
function normalize(p,   n, parts, out, i, k, res) {
  n = split(p, parts, "/")
  k = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "" || parts[i] == ".") continue
    if (parts[i] == "..") { if (k == 0) return "\001"; k--; continue }
    out[++k] = parts[i]
  }
  res = ""
  for (i = 1; i <= k; i++) res = res (i > 1 ? "/" : "") out[i]
  return res
}

function join(d, p) { return (d == "" || p ~ /^\//) ? p : d "/" p }

function report(file, line, name,   key) {
  key = file SUBSEP line SUBSEP name
  if (key in seen) return
  seen[key] = 1
  printf "%s:%s: %s\n", file, line, name
  bad++
}

{
  i = index($0, ":"); file = substr($0, 1, i - 1); rest = substr($0, i + 1)
  i = index(rest, ":"); line = substr(rest, 1, i - 1); text = substr(rest, i + 1)
  if (index(text, "verify-doc-refs: ignore")) next
  dir = file
  if (!sub(/\/[^\/]*$/, "", dir)) dir = ""

  gsub(/[A-Za-z][A-Za-z0-9+.-]*:\/\/[^ \t)>"'`]*/, "", text)

  # (b) Markdown link targets.
  if (file ~ /\.(md|markdown)$/) {
    t = text
    while (match(t, /\]\([^) \t]*/)) {
      target = substr(t, RSTART + 2, RLENGTH - 2)
      t = substr(t, RSTART + RLENGTH)
      if (target == "" || target ~ /^#/ || target ~ /^[A-Za-z][A-Za-z0-9+.-]*:/ || target ~ /^</) continue
      sub(/[#?].*$/, "", target)
      p = normalize(join(dir, target))
      if (!(p in exists) && !(p in isdir) && p != "") report(file, line, target)
    }
  }

  # (a) Tokens naming a Markdown file.
  t = text
  while (match(t, /[A-Za-z0-9_.\/-]*[A-Za-z0-9_-]\.md/)) {
    tok = substr(t, RSTART, RLENGTH)
    c1 = substr(t, RSTART + RLENGTH, 1)
    c2 = substr(t, RSTART + RLENGTH + 1, 1)
    t = substr(t, RSTART + RLENGTH)
    if (c1 ~ /[A-Za-z0-9_]/) continue                 # .mdx, .md_x: not Markdown
    if (c1 == "." && c2 ~ /[A-Za-z0-9_]/) continue    # x.md.bak
    if (normalize(join(dir, tok)) in exists) continue
    if (normalize(tok) in exists) continue
    if (tok !~ /\// && (tok in base)) continue
    report(file, line, tok)
  }
}

END { exit bad > 0 }
AWK

if awk -v tracked="${tmp}/tracked" "${program}" "${tmp}/lines" >"${tmp}/report"; then
  exit 0
fi
cat "${tmp}/report"
echo "$(wc -l <"${tmp}/report") citation(s) of files that are not in the repository (see hack/verify-doc-refs.sh for what counts as a citation)" >&2
exit 1
