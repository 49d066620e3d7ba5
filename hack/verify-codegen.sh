#!/usr/bin/env bash
# Fails when anything generated (pkg/apis zz_generated files, pkg/generated,
# manifests/crds, test/crds, hack/api-rule-violations.list) differs from what
# hack/update-codegen.sh produces from the current sources. It regenerates
# in a scratch copy of the repository, so the working tree is never touched.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT

# Copy the module without bin/ and .git, keeping the built generators so a
# second run does not rebuild them.
tar -C "${ROOT}" --exclude=./.git --exclude=./bin -cf - . | tar -C "${scratch}" -xf -
if [[ -d "${ROOT}/bin/codegen" ]]; then
  mkdir -p "${scratch}/bin" && cp -a "${ROOT}/bin/codegen" "${scratch}/bin/"
fi

"${scratch}/hack/update-codegen.sh" >/dev/null

status=0
for path in pkg/apis pkg/generated manifests/crds test/crds hack/api-rule-violations.list; do
  if ! diff -Naupr "${ROOT}/${path}" "${scratch}/${path}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "generated files are out of date: run hack/update-codegen.sh (make generate) and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
