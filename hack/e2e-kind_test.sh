#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Checks, without Docker, that hack/e2e-kind.sh runs docs/quickstart.md: the
# script it prints is valid bash and holds each step of the quickstart's
# path, in order. make verify runs it.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(hack/e2e-kind.sh --print)
bash -n <<<"${out}" || { echo "e2e-kind_test: the quickstart's commands are not valid bash" >&2; exit 1; }
last=0
for step in 'create cluster --name caliban' \
  'agent-sandbox/releases/download/v1.0.3/manifest.yaml' \
  'make release VERSION=' \
  'load image-archive dist/caliban-operator-image.tar' \
  'kubectl apply --server-side -f dist/caliban-operator.yaml' \
  'kubectl create secret generic caliban-session-plane-tls' \
  'manifests/samples/02-workspace.yaml' \
  "jsonpath='{.status.phase}'=Running" \
  'kubectl caliban why demo-task' \
  'delete cluster --name caliban'; do
  line=$(grep -nF -- "${step}" <<<"${out}" | head -1 | cut -d: -f1)
  if [[ -z "${line}" ]]; then
    echo "e2e-kind_test: the quickstart's commands lack: ${step}" >&2
    exit 1
  fi
  if ((line < last)); then
    echo "e2e-kind_test: '${step}' comes before the step it follows" >&2
    exit 1
  fi
  last=${line}
done
echo "e2e-kind_test: ok"
