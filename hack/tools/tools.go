// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the binaries of the local test bed. It is a module of its
// own because k8s.io/kubernetes cannot be a dependency of the operator itself.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
