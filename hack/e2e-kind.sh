#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# End-to-end run on kind with the real agent-sandbox controller, for machines
# with a Docker engine and network access (make test runs the same
# controller, built from its module, on the kwokctl test bed everywhere
# else). It runs docs/quickstart.md: every ```sh block of the page, in
# order, from the repository's root, so the quickstart is what was tested:
# a kind cluster, agent-sandbox v1.0.3, the operator built by make release
# and loaded from its OCI archive, real Secrets, the sample Workspace and
# task until Running, kubectl caliban why, and the clean-up.
#
#   hack/e2e-kind.sh           run it (KEEP_CLUSTER=1 keeps the cluster when
#                              a step fails; ANTHROPIC_API_KEY defaults to a
#                              placeholder, which reaches Running)
#   hack/e2e-kind.sh --print   print the script it would run, and exit
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
QUICKSTART=docs/quickstart.md

# The quickstart's command blocks, in order, as one script.
script() {
  echo "set -o errexit -o nounset -o pipefail -o xtrace"
  awk '/^```sh$/ {inblock=1; next} /^```$/ {inblock=0; next} inblock {print}' "${QUICKSTART}"
}

if [[ "${1:-}" == "--print" ]]; then
  script
  exit 0
fi

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "make e2e-kind needs a running Docker engine; none is reachable here (docker info failed)." >&2
  echo "The same scenarios run on the kwokctl test bed with: make test" >&2
  exit 1
fi
for tool in kubectl openssl curl; do
  command -v "${tool}" >/dev/null || { echo "make e2e-kind needs ${tool} on PATH" >&2; exit 1; }
done

workdir=$(mktemp -d)
export KUBECONFIG="${workdir}/kubeconfig"
export ANTHROPIC_API_KEY="${ANTHROPIC_API_KEY:-placeholder-for-e2e}"
cleanup() {
  if [[ "${KEEP_CLUSTER:-}" != 1 ]]; then
    go run sigs.k8s.io/kind@v0.33.0 delete cluster --name caliban >/dev/null 2>&1 || true
  fi
  rm -rf "${workdir}"
}
trap cleanup EXIT

script >"${workdir}/quickstart.sh"
bash "${workdir}/quickstart.sh"
echo "e2e-kind: docs/quickstart.md ran from an empty kind cluster to a task Running, and cleaned up"
