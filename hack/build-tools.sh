#!/usr/bin/env bash
# Builds the local test bed's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok, kwokctl, and kubectl for the tests of the
# Makefile's cluster targets) from the pinned module in hack/tools, and
# agent-sandbox's controller from hack/tools/agent-sandbox, into bin/. A
# binary is rebuilt only when its module's go.mod or go.sum changed since it
# was built, so repeated runs cost nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="${root}/bin"
tools="${root}/hack/tools"
mkdir -p "${bin}"

stamp_of() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }

declare -A pkgs=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [etcd]=go.etcd.io/etcd/server/v3
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kwokctl]=sigs.k8s.io/kwok/cmd/kwokctl
  [agent-sandbox-controller]=sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
)
# agent-sandbox's controller has a module of its own, so that pinning it moves
# none of the dependencies the Kubernetes binaries are built with.
declare -A modules=([agent-sandbox-controller]="${tools}/agent-sandbox")

# Cheap ones first so a failure in the module graph shows up in seconds.
for name in kwokctl kwok agent-sandbox-controller etcd kubectl kube-scheduler kube-controller-manager kube-apiserver; do
  module=${modules[$name]:-${tools}}
  stamp=$(stamp_of "${module}")
  if [[ -x "${bin}/${name}" && "$(cat "${bin}/.${name}.stamp" 2>/dev/null)" == "${stamp}" ]]; then
    continue
  fi
  echo "building ${name} (${pkgs[$name]}); a cold kube-apiserver build takes about ten minutes" >&2
  start=$(date +%s)
  (cd "${module}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/${name}.tmp" "${pkgs[$name]}")
  mv "${bin}/${name}.tmp" "${bin}/${name}"
  echo "${stamp}" > "${bin}/.${name}.stamp"
  echo "built ${name} in $(( $(date +%s) - start ))s" >&2
done
