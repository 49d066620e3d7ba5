// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-caliban is the kubectl plugin for caliban-operator's
// CalibanTasks (`kubectl caliban get|describe|why|suspend|resume|logs`,
// docs/kubectl-caliban.md). The root command is package app, the
// subcommands internal/commands, what they share internal/cli; this file
// only wires the process to the root.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/app"
)

// version and commit are stamped at build time with -ldflags -X, as the
// operator's are.
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		app.BuildInfo{Version: version, Commit: commit})
	stop()
	os.Exit(code)
}
