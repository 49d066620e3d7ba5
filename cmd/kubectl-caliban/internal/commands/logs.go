// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/diagnose"
)

// NewLogs is `logs TASK`: the log of the task's caliband container, or
// of its clone.
func NewLogs(o *cli.Options) *cobra.Command {
	var clone, follow bool
	cmd := &cobra.Command{
		Use:   "logs TASK",
		Short: "Print the log of the task's caliband container (--clone: of its clone-workspace init container)",
		Example: `  kubectl caliban logs fix-login
  kubectl caliban logs fix-login --clone
  kubectl caliban logs fix-login -f`,
		Args: cli.ExactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, task, err := readTask(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			ns := task.Namespace
			sb, err := getSandbox(cmd.Context(), c, task)
			if err != nil && !apierrors.IsNotFound(err) {
				return cli.APIError(err, "getting the Sandbox of CalibanTask %s/%s", ns, task.Name)
			}
			container := builders.ContainerCaliband
			if clone {
				container = builders.ContainerClone
			}
			pod, err := taskPod(cmd.Context(), c, task, sb)
			if err != nil {
				return err
			}
			if problem := NoContainer(pod, container, clone); problem != "" {
				return cli.WithCode(cli.ExitWaiting, fmt.Errorf("CalibanTask %s/%s: %s", ns, task.Name, problem))
			}
			stream, err := c.Core.Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(cmd.Context())
			if err != nil {
				return cli.WithCode(cli.ExitError, fmt.Errorf("reading the log of container %s in pod %s/%s: %w", container, ns, pod.Name, err))
			}
			defer func() { _ = stream.Close() }()
			if _, err := io.Copy(o.Streams.Out, stream); err != nil && cmd.Context().Err() == nil {
				return cli.WithCode(cli.ExitError, fmt.Errorf("reading the log of container %s in pod %s/%s: %w", container, ns, pod.Name, err))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clone, "clone", false, "Read the clone-workspace init container's log instead of caliband's.")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "Keep streaming the log as it grows.")
	return cmd
}

// taskPod is the pod of task's Sandbox sb (nil when there is none yet).
// No pod yet is exit code 1: a warm task's claim may hold no Sandbox to
// name one, or the pod may not be made.
func taskPod(ctx context.Context, c *cli.Clients, task *calibanv1alpha1.CalibanTask, sb *sandboxv1beta1.Sandbox) (*corev1.Pod, error) {
	ns := task.Namespace
	noPod := func(why string) error {
		return cli.WithCode(cli.ExitWaiting, fmt.Errorf("no pod yet for CalibanTask %s/%s (%s; phase %s): see kubectl caliban why %s",
			ns, task.Name, why, orNone(string(task.Status.Phase)), task.Name))
	}
	podName := diagnose.PodName(task, sb)
	if podName == "" {
		return nil, noPod("its SandboxClaim holds no Sandbox yet")
	}
	pod, err := c.Core.Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, noPod(fmt.Sprintf("pod %s not found", podName))
	}
	if err != nil {
		return nil, cli.APIError(err, "getting pod %s/%s", ns, podName)
	}
	return pod, nil
}

// NoContainer says why container of pod has no log to read yet, "" when
// it may have one: the pod does not declare it (a task without sources
// has no clone), or it has not started.
func NoContainer(pod *corev1.Pod, container string, init bool) string {
	specs, statuses := pod.Spec.Containers, pod.Status.ContainerStatuses
	if init {
		specs, statuses = pod.Spec.InitContainers, pod.Status.InitContainerStatuses
	}
	if !slices.ContainsFunc(specs, func(c corev1.Container) bool { return c.Name == container }) {
		if init {
			return fmt.Sprintf("pod %s has no %s init container: the task's pinned Workspace has no sources to clone", pod.Name, container)
		}
		return fmt.Sprintf("pod %s has no container %s", pod.Name, container)
	}
	for _, s := range statuses {
		if s.Name != container {
			continue
		}
		if s.State.Running == nil && s.State.Terminated == nil && s.LastTerminationState.Terminated == nil {
			reason := "not started"
			if s.State.Waiting != nil {
				reason = s.State.Waiting.Reason
			}
			return fmt.Sprintf("container %s in pod %s has not started yet (%s)", container, pod.Name, reason)
		}
		return ""
	}
	return fmt.Sprintf("container %s in pod %s has not started yet (pod %s)", container, pod.Name, pod.Status.Phase)
}
