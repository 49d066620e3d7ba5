#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Copies the CRDs of manifests/crds into the caliban-crds Helm chart's
# templates/, so that `helm upgrade` upgrades them (Helm never upgrades a
# chart's crds/ directory). The only change is one annotation, behind the
# chart's `keep` value: helm.sh/resource-policy: keep, so that uninstalling
# the chart leaves the CRDs, and with them every task and workspace, in place
# (docs/adr/0018-helm-charts.md). hack/update-codegen.sh runs it after
# controller-gen, so `make verify` fails on a hand edit or a stale copy.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="${ROOT}/charts/caliban-crds/templates"
mkdir -p "${out}"
rm -f "${out}"/caliban.caliban-ai.dev_*.yaml

for crd in "${ROOT}"/manifests/crds/caliban.caliban-ai.dev_*.yaml; do
  name=$(basename "${crd}")
  # Helm would read a "{{" in a description as a template action.
  if grep -q '{{' "${crd}"; then
    echo "update-crds-chart: ${crd} contains '{{', which Helm would read as a template" >&2
    exit 1
  fi
  if [[ $(grep -c '^  annotations:$' "${crd}") -ne 1 ]]; then
    echo "update-crds-chart: ${crd} has no single metadata.annotations to add the keep policy to" >&2
    exit 1
  fi
  {
    echo "# Generated from manifests/crds/${name} by hack/update-crds-chart.sh"
    echo "# (make generate). Do not edit."
    awk '
      { print }
      /^  annotations:$/ {
        print "    {{- if .Values.keep }}"
        print "    helm.sh/resource-policy: keep"
        print "    {{- end }}"
      }
    ' "${crd}"
  } >"${out}/${name}"
done
