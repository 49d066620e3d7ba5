// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

func TestNoContainer(t *testing.T) {
	noSources := fxPod("t", func(p *corev1.Pod) { p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil })
	waiting := fxPod("t", func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	})
	restarting := fxPod("t", func(p *corev1.Pod) {
		p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		p.Status.InitContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128}}
	})
	noStatus := fxPod("t", func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodPending} })
	tests := map[string]struct {
		pod       *corev1.Pod
		container string
		init      bool
		want      string
	}{
		"a running caliband has a log":                    {pod: fxPod("t"), container: builders.ContainerCaliband},
		"a finished clone has a log":                      {pod: fxPod("t"), container: builders.ContainerClone, init: true},
		"a clone in back-off has the log of its last run": {pod: restarting, container: builders.ContainerClone, init: true},
		"a task without sources has no clone":             {pod: noSources, container: builders.ContainerClone, init: true, want: "pod t-sbx has no clone-workspace init container: the task's pinned Workspace has no sources to clone"},
		"a caliband waiting for the clone has no log yet": {pod: waiting, container: builders.ContainerCaliband, want: "container caliband in pod t-sbx has not started yet (PodInitializing)"},
		"a pod with no container status yet has no log":   {pod: noStatus, container: builders.ContainerCaliband, want: "container caliband in pod t-sbx has not started yet (pod Pending)"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(test.want, NoContainer(test.pod, test.container, test.init)); diff != "" {
				t.Errorf("NoContainer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTheLogsPodOfATaskWithoutOneIsExitCode1(t *testing.T) {
	task := fxTask("fix-login", "team-a", running)
	warm := task.DeepCopy()
	warm.Status.SandboxRef = nil
	warm.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm}
	tests := map[string]struct {
		task    *calibanv1alpha1.CalibanTask
		objects []runtime.Object
		want    string
		code    int
	}{
		"a warm task whose claim holds no Sandbox yet": {
			task: warm, code: cli.ExitWaiting,
			want: "no pod yet for CalibanTask team-a/fix-login (its SandboxClaim holds no Sandbox yet; phase Running): see kubectl caliban why fix-login",
		},
		"a task whose pod is not made": {
			task: task, code: cli.ExitWaiting,
			want: "no pod yet for CalibanTask team-a/fix-login (pod fix-login-sbx not found; phase Running): see kubectl caliban why fix-login",
		},
		"a task with its pod": {task: task, objects: []runtime.Object{fxPod("fix-login")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod, err := taskPod(context.Background(), fakeClients("", tc.objects...), tc.task, nil)
			if tc.want == "" {
				if err != nil || pod == nil {
					t.Fatalf("pod %v, error %v; want the pod", pod, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if code, _ := cli.ExitCode(err); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
		})
	}
}
