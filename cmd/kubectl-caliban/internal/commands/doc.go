// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package commands is kubectl-caliban's subcommands: get, describe, why,
// suspend and resume, logs; what they read from the cluster (a task's
// Snapshot) and how they print it. Printing is done by functions of a
// gathered Snapshot and a clock, so it is tested without a cluster, and
// reading through narrow typed clients, so it is tested against fakes.
// What the commands share with each other is internal/cli; the root
// command that wires them is package app, which they never import.
package commands
