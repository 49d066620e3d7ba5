// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package charts checks the Helm charts of charts/ against manifests/, the
// one source of truth: rendered with the Helm SDK and their default values,
// the charts must produce exactly the objects Kustomize renders from
// manifests/, but for Helm's own bookkeeping labels. It also checks that the
// values schema refuses bad values by name. No cluster is needed.
package charts
