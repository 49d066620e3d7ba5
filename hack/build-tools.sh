#!/usr/bin/env bash
# Copyright The caliban-operator Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the local test bed's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok, kwokctl, and kubectl for the tests of the
# Makefile's cluster targets) from the pinned module in hack/tools,
# agent-sandbox's controller from hack/tools/agent-sandbox, and Prometheus'
# promtool (for the alerting rules' unit tests) from hack/tools/prometheus,
# into bin/. A binary is rebuilt only when its module's go.mod or go.sum (or
# its build tags) changed since it was built, so repeated runs cost nothing;
# a fresh clone copies what another clone on the machine built from the
# user's cache (CALIBAN_TOOLS_CACHE, default ~/.cache/caliban-operator/tools).
#
# Usage: hack/build-tools.sh [NAME...]   (default: every binary)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="${root}/bin"
tools="${root}/hack/tools"
mkdir -p "${bin}"

stamp_of() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }
# Built binaries are kept per module stamp, tags and Go version outside the
# clone, like Go's own build cache (docs/testing.md#where-the-time-goes).
cache="${CALIBAN_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/caliban-operator/tools}"
goversion=$(go env GOVERSION)

declare -A pkgs=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [etcd]=go.etcd.io/etcd/server/v3
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kwokctl]=sigs.k8s.io/kwok/cmd/kwokctl
  [agent-sandbox-controller]=sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
  [promtool]=github.com/prometheus/prometheus/cmd/promtool
)
# agent-sandbox's controller and promtool have a module each, so that
# pinning them moves none of the dependencies the Kubernetes binaries (or
# the operator) are built with, and these build with the versions their own
# go.mod selects. (The operator's module requires Prometheus itself, for
# test/monitoring's PromQL parser: hack/tools/prometheus/tools.go.)
declare -A modules=([agent-sandbox-controller]="${tools}/agent-sandbox" [promtool]="${tools}/prometheus")
# remove_all_sd leaves out Prometheus' service-discovery plugins (AWS, Azure,
# GCE, Consul, ...; see plugins/ in the prometheus module), which promtool
# needs only for `promtool check service-discovery`. The rule tests need
# none of them, and without them a cold build compiles far fewer packages
# (docs/testing.md#the-alerting-rules-promtool).
declare -A tags=([promtool]=remove_all_sd)

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(kwokctl kwok promtool agent-sandbox-controller etcd kubectl kube-scheduler kube-controller-manager kube-apiserver)
fi

# go build names a main package's binary after the last element of its
# import path, or the one before a major-version suffix (etcd's .../server/v3).
go_binary_name() {
  local base
  base=$(basename "$1")
  if [[ ${base} =~ ^v[0-9]+$ ]]; then
    base=$(basename "$(dirname "$1")")
  fi
  echo "${base}"
}

# What is neither in bin/ nor in the user's cache is built, one `go build`
# per module and tags for all its binaries: the compiler keeps both cores
# busy while one binary links, which a build per binary leaves half idle.
declare -A groups=()   # "module|tags" -> names
declare -A stamps=() cached_paths=()
for name in "${names[@]}"; do
  if [[ -z "${pkgs[$name]:-}" ]]; then
    echo "build-tools: no binary named ${name}; known: ${!pkgs[*]}" >&2
    exit 2
  fi
  module=${modules[$name]:-${tools}}
  stamp=$(stamp_of "${module}")
  # The tags are part of the stamp only where there are any, so that the
  # stamps of the other binaries, and with them their builds, stay as they were.
  if [[ -n "${tags[$name]:-}" ]]; then
    stamp=$(printf '%s tags=%s' "${stamp}" "${tags[$name]}" | sha256sum | cut -c1-16)
  fi
  if [[ -x "${bin}/${name}" && "$(cat "${bin}/.${name}.stamp" 2>/dev/null)" == "${stamp}" ]]; then
    continue
  fi
  stamps[$name]=${stamp}
  cached_paths[$name]="${cache}/${name}-$(printf '%s %s' "${stamp}" "${goversion}" | sha256sum | cut -c1-16)"
  # A fresh clone on a machine that built this binary before (another
  # clone, CI) takes it from the user's cache instead of relinking it.
  if [[ -x "${cached_paths[$name]}" ]]; then
    cp "${cached_paths[$name]}" "${bin}/${name}.tmp"
    mv "${bin}/${name}.tmp" "${bin}/${name}"
    echo "${stamp}" > "${bin}/.${name}.stamp"
    continue
  fi
  key="${module}|${tags[$name]:-}"
  groups[$key]="${groups[$key]:-} ${name}"
done

for key in "${!groups[@]}"; do
  module=${key%%|*}
  group_tags=${key#*|}
  read -r -a group <<<"${groups[$key]}"
  targets=()
  for name in "${group[@]}"; do
    targets+=("${pkgs[$name]}")
  done
  note=""
  if [[ " ${group[*]} " == *" kube-apiserver "* ]]; then
    note="; cold, this takes about a quarter of an hour"
  fi
  echo "building ${group[*]} (${targets[*]})${note}" >&2
  start=$(date +%s)
  # -s -w: no symbol table or DWARF, which nobody debugs the test bed with
  # and which take most of a link (kube-apiserver: 14 s with, 4 s without).
  # Not part of the stamp: a binary built with them works like one without.
  flags=(-trimpath -ldflags=-s\ -w)
  if [[ -n "${group_tags}" ]]; then
    flags+=(-tags "${group_tags}")
  fi
  out=$(mktemp -d "${bin}/.build.XXXXXX")
  (cd "${module}" && CGO_ENABLED=0 go build "${flags[@]}" -o "${out}/" "${targets[@]}") || { rm -rf "${out}"; exit 1; }
  mkdir -p "${cache}"
  for name in "${group[@]}"; do
    built="${out}/$(go_binary_name "${pkgs[$name]}")"
    cp "${built}" "${cached_paths[$name]}.tmp.$$" && mv "${cached_paths[$name]}.tmp.$$" "${cached_paths[$name]}"
    mv "${built}" "${bin}/${name}"
    echo "${stamps[$name]}" > "${bin}/.${name}.stamp"
  done
  rm -rf "${out}"
  echo "built ${group[*]} in $(( $(date +%s) - start ))s" >&2
done
