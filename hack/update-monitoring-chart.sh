#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Copies the monitoring artefacts of manifests/monitoring (the PodMonitor,
# the PrometheusRule and the Grafana dashboard) into the caliban-operator chart's files/, where
# its templates can read them: Helm reads no file outside the chart. The
# copies are byte for byte; templates/monitoring.yaml wraps them in the
# chart's labels and namespace, and test/charts checks that the chart then
# renders what `kubectl apply -k manifests/monitoring` renders.
# hack/update-codegen.sh (make generate) runs it, so `make verify` fails on a
# hand edit or a stale copy.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="${ROOT}/manifests/monitoring"
out="${ROOT}/charts/caliban-operator/files/monitoring"
rm -rf "${out}"
mkdir -p "${out}/dashboards"
cp "${src}/prometheusrule.yaml" "${out}/prometheusrule.yaml"
cp "${src}/podmonitor.yaml" "${out}/podmonitor.yaml"
cp "${src}"/dashboards/*.json "${out}/dashboards/"
