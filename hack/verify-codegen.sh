#!/usr/bin/env bash
# Fails when anything generated (pkg/apis zz_generated files, pkg/generated,
# manifests/crds, charts/caliban-crds/templates, charts/caliban-operator/files
# (manifests/monitoring's, copied), test/crds and test/stages/kwok
# (upstream's, copied from the pinned modules), hack/api-rule-violations.list) differs from what
# hack/update-codegen.sh produces from the current sources. It regenerates
# in a scratch copy of the repository, so the working tree is never touched,
# and with an empty Go module cache and no prebuilt generators: the way a
# new contributor's machine runs `make generate` for the first time. A warm
# cache once hid that the script could not find k8s.io/code-generator.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
modcache=$(mktemp -d)
trap 'rm -rf "${scratch}" "${modcache}"' EXIT

# Copy the module without bin/ and .git.
tar -C "${ROOT}" --exclude=./.git --exclude=./bin -cf - . | tar -C "${scratch}" -xf -

# -modcacherw leaves the downloaded modules writable so the trap can remove
# them. The build cache stays shared: it only makes the run faster.
if ! GOMODCACHE="${modcache}" GOFLAGS="${GOFLAGS:+${GOFLAGS} }-modcacherw" \
    "${scratch}/hack/update-codegen.sh" >"${scratch}.log" 2>&1; then
  cat "${scratch}.log" >&2
  rm -f "${scratch}.log"
  echo "hack/update-codegen.sh failed with an empty module cache (GOMODCACHE=${modcache})" >&2
  exit 1
fi
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
echo "generated files are up to date"
