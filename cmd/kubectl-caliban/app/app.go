// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is kubectl-caliban's root command: it wires the subcommands
// of internal/commands under one cobra command with kubectl's connection
// flags, runs it, and turns its error into the exit code. What the
// subcommands share is internal/cli, which they import instead of this
// package. What a task waits for is decided in pkg/diagnose (pure).
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/commands"
)

// The exit codes and the field manager, for those who run the plugin in
// process (the integration tests): internal/cli and internal/commands
// cannot be imported from outside cmd/kubectl-caliban.
const (
	ExitOK      = cli.ExitOK
	ExitWaiting = cli.ExitWaiting
	ExitUsage   = cli.ExitUsage
	ExitError   = cli.ExitError

	FieldManager = commands.FieldManager
)

// BuildInfo is the version stamped into the binary.
type BuildInfo struct {
	Version, Commit string
}

// NewCommand is the root command, writing to streams.
func NewCommand(streams genericiooptions.IOStreams, info BuildInfo) *cobra.Command {
	o := cli.NewOptions(streams)
	root := &cobra.Command{
		Use:   "kubectl-caliban",
		Short: "Inspect and steer caliban-operator's CalibanTasks",
		Long: "kubectl caliban shows CalibanTasks, says what a task is waiting for, " +
			"suspends and resumes tasks and reads their caliband logs.",
		Version:       fmt.Sprintf("%s (commit %s)", info.Version, info.Commit),
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl caliban"},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetIn(streams.In)
	o.Flags.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.WithCode(cli.ExitUsage, err) })
	root.AddCommand(commands.NewGet(o), commands.NewDescribe(o), commands.NewWhy(o),
		commands.NewSuspend(o, true), commands.NewSuspend(o, false), commands.NewLogs(o))
	return root
}

// Run runs the plugin with args (without the program name) and returns
// the exit code. Errors are written to streams.ErrOut.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams, info BuildInfo) int {
	root := NewCommand(streams, info)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, silent := cli.ExitCode(err)
	if !silent {
		// An error may quote the apiserver, which may quote what anyone
		// wrote: escaped like everything else the plugin prints.
		fmt.Fprintf(streams.ErrOut, "error: %s\n", cli.PrintableText(err.Error()))
	}
	return code
}
