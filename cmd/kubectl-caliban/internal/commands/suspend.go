// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/caliban/v1alpha1"
)

// FieldManager is the server-side apply manager of suspend and resume.
const FieldManager = "kubectl-caliban"

// NewSuspend is `suspend` (on) or `resume` (!on): spec.suspend by
// server-side apply.
func NewSuspend(o *cli.Options, on bool) *cobra.Command {
	verb, done, short := "resume", "resumed", "Resume a suspended task: set spec.suspend to false"
	if on {
		verb, done, short = "suspend", "suspended", "Suspend a task: set spec.suspend to true (the pod goes, the workspace volume stays)"
	}
	return &cobra.Command{
		Use:     verb + " TASK",
		Short:   short,
		Example: "  kubectl caliban " + verb + " fix-login",
		Args:    cli.ExactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, task, err := readTask(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			ns := task.Namespace
			_, err = c.Caliban.CalibanTasks(ns).Apply(cmd.Context(), SuspendApply(task.Name, ns, task.UID, on),
				metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			if err != nil {
				return cli.APIError(err, "applying spec.suspend=%t to CalibanTask %s/%s", on, ns, task.Name)
			}
			fmt.Fprintf(o.Streams.Out, "calibantask.caliban.caliban-ai.dev/%s %s\n", cli.Printable(task.Name), done)
			return nil
		},
	}
}

// SuspendApply is the whole intent of suspend and resume: spec.suspend and
// nothing else. The UID makes the apply fail on a task deleted and
// re-created meanwhile instead of reaching the new one, and on a deleted
// task instead of creating one. Forced: suspending is a person's explicit
// decision, and whoever set the field before (the task's creator) loses
// it to that decision.
func SuspendApply(name, ns string, uid types.UID, on bool) *calibanac.CalibanTaskApplyConfiguration {
	return calibanac.CalibanTask(name, ns).WithUID(uid).WithSpec(calibanac.CalibanTaskSpec().WithSuspend(on))
}
