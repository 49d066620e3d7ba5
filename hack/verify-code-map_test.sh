#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Self-test of hack/verify-code-map.sh: builds scratch git repositories
# (Go modules, whose packages import each other) whose docs/architecture.md
# maps the code well or badly and checks that the script passes or fails on
# each, naming the right directories and arrows. Exits non-zero when any
# case does not behave as expected.
set -o errexit -o nounset -o pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/verify-code-map.sh
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
failures=0
doc=docs/architecture.md
section='"Where the code lives"'

# import_in REPO DIR PKG...: makes the package in DIR import the packages
# in the PKGs (directories of the scratch module).
import_in() {
  local repo=$1 dir=$2 pkg
  shift 2
  for pkg in "$@"; do
    printf 'import _ "example.com/m/%s"\n' "${pkg}" >>"${repo}/${dir}/f.go"
  done
}

# new_repo creates a repository whose map names every directory and whose
# arrows are its imports, and prints its path. Extra lines for the section
# are read from stdin.
new_repo() {
  local repo d
  repo=$(mktemp -d "${scratch}/repo.XXXXXX")
  git -C "${repo}" init -q
  printf 'module example.com/m\n\ngo 1.22\n' >"${repo}/go.mod"
  for d in cmd/tool cmd/tool/app pkg/a pkg/a/b pkg/generated/clientset/versioned \
    pkg/generated/clientset/versioned/fake pkg/generated/listers/x/v1; do
    mkdir -p "${repo}/${d}"
    printf 'package %s\n' "$(basename "${d}")" >"${repo}/${d}/f.go"
  done
  import_in "${repo}" cmd/tool cmd/tool/app pkg/a
  import_in "${repo}" cmd/tool/app pkg/generated/listers/x/v1
  import_in "${repo}" pkg/a pkg/a/b pkg/generated/clientset/versioned
  import_in "${repo}" pkg/generated/clientset/versioned/fake pkg/generated/clientset/versioned
  mkdir -p "${repo}/pkg/a/testdata/fixture" "${repo}/pkg/notes" "${repo}/docs"
  printf 'package fixture\n' >"${repo}/pkg/a/testdata/fixture/f.go"
  printf 'no Go here\n' >"${repo}/pkg/notes/README"
  {
    printf '# Architecture\n\n## Components\n\nThe `pkg/elsewhere` of another section is not checked.\n\n'
    printf '## Where the code lives\n\n```\ncmd/tool ──► `pkg/in-a-diagram`\n```\n\n'
    printf '```arrows\ncmd/tool ──► pkg/a, pkg/generated  # a comment\n\npkg/a -> pkg/generated\npkg/generated\n```\n\n'
    printf '| Path | What |\n|---|---|\n'
    printf '| `cmd/tool/` | the command (`cmd/tool/f.go`) |\n| `cmd/tool/app` | its process |\n'
    printf '| `pkg/a` | a |\n| `pkg/a/b/` | b |\n'
    printf '| `pkg/generated/clientset` | generated clients |\n| `pkg/generated/listers` | generated listers |\n'
    printf '| `pkg/notes` | notes, no Go |\n\n'
    printf '### A subsection\n\nSee `pkg/a/f.go` and `go test ./pkg/...`.\n'
    cat
    printf '\n## Next\n\nAnd `pkg/gone` here is not checked either.\n'
  } >"${repo}/${doc}"
  git -C "${repo}" add -A
  echo "${repo}"
}

# expect WANT_STATUS NAME REPO [LINE...]: runs the script and checks its
# exit status; with status 1, its output must be exactly the LINEs, in any
# order.
expect() {
  local want=$1 name=$2 repo=$3
  shift 3
  local out got=0
  out=$("${script}" -C "${repo}" 2>/dev/null) || got=$?
  if [[ ${got} -ne ${want} ]]; then
    echo "FAIL ${name}: exit status ${got}, want ${want}; output:"
    echo "${out}" | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  if [[ ${want} -eq 1 ]] && ! diff <(sort <<<"${out}") <(printf '%s\n' "$@" | sort) >/dev/null; then
    echo "FAIL ${name}: output is not the expected lines; got:"
    echo "${out}" | sed 's/^/    /'
    echo "  want:"
    printf '    %s\n' "$@"
    failures=$((failures + 1))
    return
  fi
  echo "ok   ${name}"
}

unnamed() { echo "$1: holds Go files but is not named in ${doc}'s ${section}"; }

repo=$(new_repo </dev/null)
expect 0 "every directory named, generated trees at their root, diagrams, files and other sections pass" "${repo}"

repo=$(new_repo </dev/null)
mkdir -p "${repo}/pkg/c" "${repo}/cmd/tool/internal/cli"
printf 'package c\n' >"${repo}/pkg/c/c.go"
printf 'package cli\n' >"${repo}/cmd/tool/internal/cli/cli.go"
git -C "${repo}" add -A
expect 1 "directories with Go files that the map leaves out fail, each named" "${repo}" \
  "$(unnamed pkg/c)" "$(unnamed cmd/tool/internal/cli)" \
  "pkg/c: a package in no room of ${doc}'s arrows list"

repo=$(new_repo </dev/null)
sed -i '/`pkg\/a\/b\/`/d' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "a named parent outside pkg/generated does not cover its children" "${repo}" "$(unnamed pkg/a/b)"

repo=$(new_repo <<<'Everything generated is `pkg/generated`.')
sed -i '/`pkg\/generated\/listers`/d' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "naming pkg/generated alone covers no generated tree" "${repo}" "$(unnamed pkg/generated/listers/x/v1)"

repo=$(new_repo <<<'Since `pkg/b` and `cmd/tool/main.go` and `pkg/a/c/`.')
git -C "${repo}" add -A
expect 1 "named paths that do not exist fail, with their line" "${repo}" \
  "${doc}:33: pkg/b: named in ${section} but not in the repository" \
  "${doc}:33: cmd/tool/main.go: named in ${section} but not in the repository" \
  "${doc}:33: pkg/a/c: named in ${section} but not in the repository"

repo=$(new_repo </dev/null)
sed -i 's/`pkg\/a`/pkg\/a/' "${repo}/${doc}"
printf '\nOnly here: `pkg/a`.\n' >>"${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "a directory named only outside the section or not as code fails" "${repo}" "$(unnamed pkg/a)"

repo=$(new_repo </dev/null)
sed -i 's/^## Where the code lives$/## Where code lives/' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "a missing section fails" "${repo}" "${doc}: has no section \"## Where the code lives\", the map of the code"

repo=$(new_repo </dev/null)
mkdir -p "${repo}/pkg/untracked"
printf 'package untracked\n' >"${repo}/pkg/untracked/u.go"
expect 0 "untracked directories are not required" "${repo}"

extra() { echo "${doc}:$1: extra arrow $2 ──► $3: no package in $2 imports one in $3"; }

repo=$(new_repo </dev/null)
import_in "${repo}" pkg/generated/listers/x/v1 pkg/a/b
git -C "${repo}" add -A
expect 1 "an import the arrows leave out fails, once for its two rooms, with the import" "${repo}" \
  "${doc}: missing arrow pkg/generated ──► pkg/a: pkg/generated/listers/x/v1 imports pkg/a/b"

repo=$(new_repo </dev/null)
sed -i 's/^pkg\/a -> pkg\/generated$/pkg\/a -> pkg\/generated, cmd\/tool/' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "an arrow no import needs fails, with its line" "${repo}" "$(extra 16 pkg/a cmd/tool)"

repo=$(new_repo </dev/null)
sed -i 's/^cmd\/tool ──► pkg\/a, pkg\/generated  # a comment$/cmd\/tool ──► pkg\/generated/' "${repo}/${doc}"
sed -i 's/^pkg\/a -> pkg\/generated$/pkg\/a -> pkg\/generated, pkg\/a\/b, cmd\/tool\/app/' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "nested rooms are rooms of their own: their imports are arrows, missing and extra each named" "${repo}" \
  "${doc}: missing arrow cmd/tool ──► pkg/a: cmd/tool imports pkg/a" \
  "${doc}: missing arrow cmd/tool ──► cmd/tool/app: cmd/tool imports cmd/tool/app" \
  "${doc}: missing arrow cmd/tool/app ──► pkg/generated: cmd/tool/app imports pkg/generated/listers/x/v1" \
  "$(extra 14 cmd/tool pkg/generated)" "$(extra 16 pkg/a cmd/tool/app)"

repo=$(new_repo <<<'And `pkg/c` is c.')
mkdir -p "${repo}/pkg/c"
printf 'package c\n' >"${repo}/pkg/c/c.go"
import_in "${repo}" pkg/a pkg/c
sed -i 's/^pkg\/generated$/pkg\/generated ──► pkg\/gone/' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "a package in no room, and a room that does not exist, fail" "${repo}" \
  "pkg/c: a package in no room of ${doc}'s arrows list" \
  "${doc}:17: pkg/gone: a room of the arrows list but not a directory in the repository"

repo=$(new_repo </dev/null)
sed -i '/^```arrows$/,/^```$/d' "${repo}/${doc}"
git -C "${repo}" add -A
expect 1 "a section without its arrows list fails" "${repo}" \
  "${doc}: ${section} has 0 arrows lists (\`\`\`arrows), not one"

if [[ ${failures} -gt 0 ]]; then
  echo "${failures} case(s) failed" >&2
  exit 1
fi
echo "all cases passed"
