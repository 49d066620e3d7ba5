// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cli is what every kubectl-caliban subcommand shares and none
// owns: kubectl's connection flags and the clients built from them, the
// streams and the clock, the exit codes and the errors that carry them,
// the argument rule of the per-task commands, and the escaping of what
// they print from the cluster (Printable). The subcommands import
// it; it imports neither them nor the root command, so the wiring only
// ever points down.
package cli
