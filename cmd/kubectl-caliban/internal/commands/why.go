// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
)

// NewWhy is `why TASK`: the one line of what the task waits for, and an
// exit code scripts can wait on.
func NewWhy(o *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "why TASK",
		Short: "Print what the task is waiting for; exit 0 when it runs or has finished, 1 while it waits",
		Example: `  kubectl caliban why fix-login
  until kubectl caliban why fix-login; do sleep 5; done`,
		Args: cli.ExactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := snapshot(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			// A read refused (no access to Sandboxes, pods or Events)
			// leaves the diagnosis with less to go on: say so beside the
			// line rather than fail.
			for _, p := range s.Problems {
				fmt.Fprintf(o.Streams.ErrOut, "warning: could not read %s\n", cli.Printable(p))
			}
			d := s.Diagnosis()
			fmt.Fprintln(o.Streams.Out, cli.Printable(d.Line()))
			if d.Blocked {
				return cli.SilentExit(cli.ExitWaiting)
			}
			return nil
		},
	}
}
