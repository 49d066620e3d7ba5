// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins actionlint, which make verify runs on the release
// workflow. A module of its own, so that neither the operator nor the test
// bed depends on it.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
