// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
)

// NewGet is `get [TASK]`: the table, or -o json|yaml.
func NewGet(o *cli.Options) *cobra.Command {
	var (
		allNamespaces bool
		output        string
	)
	cmd := &cobra.Command{
		Use:   "get [TASK]",
		Short: "List CalibanTasks (or show one) with their pinned model and endpoint",
		Example: `  kubectl caliban get
  kubectl caliban get -A
  kubectl caliban get fix-login -o yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.WithCode(cli.ExitUsage, fmt.Errorf("expected at most one TASK name, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return cli.WithCode(cli.ExitUsage, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json, yaml", output))
			}
			if allNamespaces && len(args) == 1 {
				return cli.WithCode(cli.ExitUsage, fmt.Errorf("a TASK name cannot be combined with --all-namespaces"))
			}
			c, err := o.Clients()
			if err != nil {
				return err
			}
			ns := metav1.NamespaceAll
			if !allNamespaces {
				if ns, err = o.Namespace(); err != nil {
					return err
				}
			}
			var tasks []calibanv1alpha1.CalibanTask
			var obj runtime.Object
			if len(args) == 1 {
				task, err := getTask(cmd.Context(), c, ns, args[0])
				if err != nil {
					return err
				}
				tasks, obj = []calibanv1alpha1.CalibanTask{*task}, task
			} else {
				list, err := c.Caliban.CalibanTasks(ns).List(cmd.Context(), metav1.ListOptions{})
				if err != nil {
					return cli.APIError(err, "listing CalibanTasks")
				}
				tasks, obj = list.Items, list
			}
			if output != "" {
				return printObject(o.Streams.Out, obj, output)
			}
			if len(tasks) == 0 {
				if allNamespaces {
					fmt.Fprintln(o.Streams.ErrOut, "No resources found")
				} else {
					fmt.Fprintf(o.Streams.ErrOut, "No resources found in %s namespace.\n", ns)
				}
				return nil
			}
			return PrintTable(o.Streams.Out, tasks, o.Now(), allNamespaces)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "List the tasks of every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: a table).")
	return cmd
}

// PrintTable writes the tasks as kubectl writes a table: NAME, PHASE,
// POSTURE (admitted), WORKSPACE, MODEL (pinned), ENDPOINT, AGE, with
// NAMESPACE first when withNamespace. An empty cell is a field not set
// yet (no pin, no endpoint).
func PrintTable(w io.Writer, tasks []calibanv1alpha1.CalibanTask, now time.Time, withNamespace bool) error {
	tw := printers.GetNewTabWriter(w)
	header := "NAME\tPHASE\tPOSTURE\tWORKSPACE\tMODEL\tENDPOINT\tAGE"
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for i := range tasks {
		t := &tasks[i]
		model := ""
		if t.Status.ResolvedWorkspace != nil {
			model = t.Status.ResolvedWorkspace.Provider.Model
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", printableArgs([]any{t.Name, t.Status.Phase, t.Status.PermissionPosture,
			t.Spec.WorkspaceRef.Name, model, t.Status.CalibandEndpoint, age(t.CreationTimestamp, now)})...)
		if withNamespace {
			row = cli.Printable(t.Namespace) + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// age is kubectl's AGE: "<unknown>" for an unset time.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// printObject writes a task or a list of tasks as json or yaml, with its
// kind and apiVersion (the typed client drops them) and without
// managedFields, as kubectl does by default.
func printObject(w io.Writer, obj runtime.Object, format string) error {
	obj = obj.DeepCopyObject()
	if list, ok := obj.(*calibanv1alpha1.CalibanTaskList); ok {
		for i := range list.Items {
			list.Items[i].APIVersion = calibanv1alpha1.SchemeGroupVersion.String()
			list.Items[i].Kind = "CalibanTask"
			list.Items[i].ManagedFields = nil
		}
	}
	if task, ok := obj.(*calibanv1alpha1.CalibanTask); ok {
		task.ManagedFields = nil
	}
	p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(format)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	return printers.NewTypeSetter(calibanscheme.Scheme).ToPrinter(p).PrintObj(obj, w)
}
