#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Copies the upstream manifests the test bed installs, from the modules the
# test bed is built from, so that no test runs against a hand-kept copy:
#   test/crds/agents.x-k8s.io_sandboxes.yaml  agent-sandbox's own Sandbox CRD
#       (hack/tools/agent-sandbox): its schema and CEL rules, such as
#       "volumeClaimTemplates is immutable", exactly as that release serves them;
#   test/crds/extensions/  the CRDs of its extensions API (SandboxTemplate,
#       SandboxWarmPool, SandboxClaim), which only clusters running the real
#       controller install;
#   test/stages/kwok/  kwok's node and pod Stages (hack/tools): with Stages
#       read as objects kwok has no built-in ones, and the real agent-sandbox
#       controller needs nodes that become Ready and pods that run.
# hack/update-codegen.sh runs it, so `make verify` fails on drift.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# module_dir MODULE_DIR PATH prints the directory of PATH at the version
# MODULE_DIR's go.mod pins, downloading it into the module cache if needed.
module_dir() {
  local version dir
  version=$(cd "$1" && go list -m -f '{{.Version}}' "$2")
  dir=$(cd "$1" && go mod download -json "$2@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [[ -z "${dir}" || ! -d "${dir}" ]]; then
    echo "could not download $2@${version}" >&2
    exit 1
  fi
  echo "${dir}"
}

sandbox=$(module_dir "${ROOT}/hack/tools/agent-sandbox" sigs.k8s.io/agent-sandbox)
mkdir -p "${ROOT}/test/crds"
rm -f "${ROOT}"/test/crds/agents.x-k8s.io_*.yaml
install -m 0644 "${sandbox}/k8s/crds/agents.x-k8s.io_sandboxes.yaml" "${ROOT}/test/crds/"
rm -rf "${ROOT}/test/crds/extensions"
mkdir -p "${ROOT}/test/crds/extensions"
install -m 0644 "${sandbox}"/k8s/crds/extensions.agents.x-k8s.io_*.yaml "${ROOT}/test/crds/extensions/"

kwok=$(module_dir "${ROOT}/hack/tools" sigs.k8s.io/kwok)
rm -rf "${ROOT}/test/stages/kwok"
mkdir -p "${ROOT}/test/stages/kwok"
for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  install -m 0644 "${kwok}/kustomize/stage/${f}" "${ROOT}/test/stages/kwok/"
done
