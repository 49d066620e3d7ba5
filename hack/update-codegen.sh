#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Regenerates everything derived from pkg/apis: deepcopy and register code,
# OpenAPI definitions, the typed clientset with watch and applyconfigurations,
# listers and informers (pkg/generated), the shipped CRDs (manifests/crds)
# and their copy in the caliban-crds chart (charts/caliban-crds/templates);
# copies the monitoring artefacts of manifests/monitoring into the
# caliban-operator chart (charts/caliban-operator/files/monitoring); copies
# agent-sandbox's own Sandbox CRD into test/crds and kwok's node and pod
# Stages into test/stages/kwok (update-upstream-manifests.sh). Needs only
# Go: every generator is pinned in go.mod and built into bin/codegen on
# first use.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
MODULE=github.com/caliban-ai/caliban-operator
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

# kube_codegen.sh installs its generators into GOBIN; keep them in the repo's
# git-ignored bin/ rather than the user's GOPATH.
export GOBIN="${ROOT}/bin/codegen"
mkdir -p "${GOBIN}"

# `go list -m -f {{.Dir}}` prints nothing for a module that is not in the
# module cache yet (a fresh machine), so download it first; the version is
# the one go.mod pins.
go mod download k8s.io/code-generator
CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
  echo "update-codegen: cannot find kube_codegen.sh of k8s.io/code-generator (module directory '${CODEGEN_PKG}')" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" "${ROOT}/pkg/apis"
kube::codegen::gen_register --boilerplate "${BOILERPLATE}" "${ROOT}/pkg/apis"

kube::codegen::gen_openapi \
  --output-dir "${ROOT}/pkg/generated/openapi" \
  --output-pkg "${MODULE}/pkg/generated/openapi" \
  --report-filename "${ROOT}/hack/api-rule-violations.list" \
  --update-report \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis/caliban"

schema=$(mktemp)
trap 'rm -f "${schema}"' EXIT
go run ./hack/models-schema > "${schema}"

# The Sandbox view's apply configurations nest client-go's for the core
# types it embeds, so the pod spec is built with the same types as every
# other child's.
core_ac=k8s.io/client-go/applyconfigurations/core/v1
kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-externals "k8s.io/api/core/v1.PodSpec:${core_ac},k8s.io/api/core/v1.PersistentVolumeClaimSpec:${core_ac}" \
  --applyconfig-openapi-schema "${schema}" \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

# CRDs. controller-gen reads the kubebuilder markers; it is the only part of
# controller-tools the project uses, and only here.
rm -f manifests/crds/caliban.caliban-ai.dev_*.yaml
go tool controller-gen crd paths=./pkg/apis/caliban/... output:crd:artifacts:config=manifests/crds
go run ./hack/crd-postprocess manifests/crds/caliban.caliban-ai.dev_calibantasks.yaml

# The caliban-crds Helm chart carries the same CRDs as templates (so that
# `helm upgrade` upgrades them), each with the keep policy (docs/adr/0018-helm-charts.md).
"${ROOT}/hack/update-crds-chart.sh"

# The caliban-operator chart renders the PrometheusRule and the dashboard of
# manifests/monitoring from copies in its files/ (Helm reads nothing outside
# the chart).
"${ROOT}/hack/update-monitoring-chart.sh"

# The Sandbox CRD and kwok Stages the tests install are upstream's own,
# copied from the pinned modules (pkg/apis/sandbox is only the operator's
# view of the Sandbox).
"${ROOT}/hack/update-upstream-manifests.sh"
