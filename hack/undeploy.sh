#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Removes caliban-operator from the cluster of the current KUBECONFIG: every
# CalibanTask first, while the operator still runs to drain them, then the
# operator, then the CRDs. It cannot hang on a task waiting for its drain:
# after UNDEPLOY_DRAIN_WAIT seconds (default 60) the drain finalizer of each
# task still there is removed, and the task goes without a checkpoint.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

wait_seconds=${UNDEPLOY_DRAIN_WAIT:-60}
if ! [[ "${wait_seconds}" =~ ^[0-9]+$ ]]; then
  echo "undeploy: UNDEPLOY_DRAIN_WAIT '${wait_seconds}' is not a whole number of seconds" >&2
  exit 1
fi
finalizer=caliban.caliban-ai.dev/drain

remaining() { kubectl get calibantasks --all-namespaces -o name; }

if kubectl get crd calibantasks.caliban.caliban-ai.dev >/dev/null 2>&1; then
  kubectl delete calibantasks --all --all-namespaces --wait=false
  deadline=$((SECONDS + wait_seconds))
  while [[ -n "$(remaining)" ]] && (( SECONDS < deadline )); do
    sleep 1
  done
  if [[ -n "$(remaining)" ]]; then
    echo "undeploy: tasks still draining after ${wait_seconds}s; removing their ${finalizer} finalizer" >&2
    # namespace, name and the index of the drain finalizer, a task a line.
    left=$(kubectl get calibantasks --all-namespaces -o go-template='{{range .items}}{{$t := .}}{{range $i, $f := .metadata.finalizers}}{{if eq $f "'"${finalizer}"'"}}{{$t.metadata.namespace}} {{$t.metadata.name}} {{$i}}{{"\n"}}{{end}}{{end}}{{end}}')
    while read -r ns name index; do
      [[ -n "${name}" ]] || continue
      # The test op spares a list that changed meanwhile (the operator may
      # have removed the entry itself).
      kubectl patch calibantask "${name}" -n "${ns}" --type=json \
        -p "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/${index}\",\"value\":\"${finalizer}\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/${index}\"}]" \
        || echo "undeploy: could not remove the finalizer of ${ns}/${name}; it may have gone already" >&2
    done <<<"${left}"
  fi
fi
kubectl delete --ignore-not-found -k manifests/base
kubectl delete --ignore-not-found -k manifests/crds
