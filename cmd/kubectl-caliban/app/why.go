package app

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newWhyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "why TASK",
		Short: "Print what the task is waiting for; exit 0 when it runs or has finished, 1 while it waits",
		Example: `  kubectl caliban why fix-login
  until kubectl caliban why fix-login; do sleep 5; done`,
		Args: exactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.snapshot(cmd, args[0])
			if err != nil {
				return err
			}
			// A read refused (no access to Sandboxes, pods or Events)
			// leaves the diagnosis with less to go on: say so beside the
			// line rather than fail.
			for _, p := range s.Problems {
				fmt.Fprintf(o.streams.ErrOut, "warning: could not read %s\n", p)
			}
			d := s.Diagnosis()
			fmt.Fprintln(o.streams.Out, d.Line())
			if d.Blocked {
				return silentExit(ExitWaiting)
			}
			return nil
		},
	}
}
