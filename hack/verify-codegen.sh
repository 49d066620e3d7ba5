#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when anything generated (pkg/apis zz_generated files, pkg/generated,
# manifests/crds, charts/caliban-crds/templates, charts/caliban-operator/files
# (manifests/monitoring's, copied), test/crds and test/stages/kwok
# (upstream's, copied from the pinned modules), hack/api-rule-violations.list) differs from what
# hack/update-codegen.sh produces from the current sources. It regenerates
# in a scratch copy of the repository, so the working tree is never touched,
# and with no prebuilt generators. Once per install recipe it regenerates
# with an empty Go module cache as well: the way a new contributor's machine
# runs `make generate` for the first time. A warm cache once hid that the
# script could not find k8s.io/code-generator.
#
# The install recipe is everything that decides what a fresh machine must
# download and build: go.mod, go.sum, every file under hack/ (the scripts,
# the generators' helper programs, the tools' modules) and the Go version.
# Its hash is recorded in the user's cache once a regeneration from an empty
# module cache passed with it (CALIBAN_VERIFY_CACHE, default
# ~/.cache/caliban-operator/verify); while it is unchanged the regeneration
# uses the module cache at hand, which takes a quarter of the time and
# checks the same drift. CALIBAN_VERIFY_EMPTY_MODCACHE=always skips the record.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
modcache=$(mktemp -d)
trap 'rm -rf "${scratch}" "${modcache}"' EXIT

recipe=$(cd "${ROOT}" && { go env GOVERSION; find go.mod go.sum hack -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-32)
records="${CALIBAN_VERIFY_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/caliban-operator/verify}"
record="${records}/empty-modcache-${recipe}"
empty=true
if [[ "${CALIBAN_VERIFY_EMPTY_MODCACHE:-}" != always && -f "${record}" ]]; then
  empty=false
fi

# Copy the module without bin/ and .git.
tar -C "${ROOT}" --exclude=./.git --exclude=./bin -cf - . | tar -C "${scratch}" -xf -

# -modcacherw leaves the downloaded modules writable so the trap can remove
# them. The build cache stays shared: it only makes the run faster.
modcache_env=()
how="with the module cache at hand: this install recipe passed with an empty one before (${record})"
if [[ ${empty} == true ]]; then
  modcache_env=(GOMODCACHE="${modcache}" GOFLAGS="${GOFLAGS:+${GOFLAGS} }-modcacherw")
  how="with an empty module cache (GOMODCACHE=${modcache})"
fi
if ! env "${modcache_env[@]}" "${scratch}/hack/update-codegen.sh" >"${scratch}.log" 2>&1; then
  cat "${scratch}.log" >&2
  rm -f "${scratch}.log"
  echo "hack/update-codegen.sh failed, run ${how}" >&2
  exit 1
fi
echo "regenerated ${how}"
rm -f "${scratch}.log"

status=0
for path in pkg/apis pkg/generated manifests/crds charts/caliban-crds/templates charts/caliban-operator/files test/crds test/stages/kwok hack/api-rule-violations.list; do
  if ! diff -Naupr "${ROOT}/${path}" "${scratch}/${path}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "generated files are out of date: run hack/update-codegen.sh (make generate) and commit the result" >&2
  exit 1
fi
if [[ ${empty} == true ]]; then
  mkdir -p "${records}"
  date -u +%Y-%m-%dT%H:%M:%SZ > "${record}"
fi
echo "generated files are up to date"
