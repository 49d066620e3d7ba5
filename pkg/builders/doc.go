// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package builders holds every decision the operator makes, as pure
// functions: no clients, no clock, no environment. The controllers in
// pkg/operator gather inputs, call these, and apply what they return. The
// renderers take the agent settings pkg/config read at start-up as an
// argument, like any other input.
package builders
