package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Usage errors end with ExitUsage before any request is made: these runs
// have no cluster to talk to.
func TestRunUsageErrors(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"why without a task":                       {args: []string{"why"}, wantErr: "expected exactly one TASK name, got 0 arguments"},
		"describe with two tasks":                  {args: []string{"describe", "a", "b"}, wantErr: "expected exactly one TASK name, got 2 arguments"},
		"an unknown command":                       {args: []string{"explain"}, wantErr: `unknown command "explain"`},
		"an unknown flag":                          {args: []string{"get", "--wide"}, wantErr: "unknown flag: --wide"},
		"an output format other than json or yaml": {args: []string{"get", "-o", "wide"}, wantErr: `output format "wide"`},
		"a task name with --all-namespaces":        {args: []string{"get", "x", "-A"}, wantErr: "cannot be combined with --all-namespaces"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(context.Background(), test.args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, BuildInfo{})
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d (stderr %q)", code, ExitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), test.wantErr) {
				t.Errorf("stderr %q does not say %q", errOut.String(), test.wantErr)
			}
		})
	}
}

func TestVersionIsTheStampedOne(t *testing.T) {
	var out bytes.Buffer
	code := Run(context.Background(), []string{"--version"}, genericiooptions.IOStreams{Out: &out, ErrOut: &out}, BuildInfo{Version: "v1.2.3", Commit: "abc1234"})
	if code != ExitOK || !strings.Contains(out.String(), "v1.2.3 (commit abc1234)") {
		t.Errorf("--version: exit %d, output %q", code, out.String())
	}
}

func TestSuspendApplyCarriesOnlySuspendAndTheUID(t *testing.T) {
	tests := map[string]struct {
		on   bool
		want string
	}{
		"suspend sets spec.suspend true": {on: true,
			want: `{"kind":"CalibanTask","apiVersion":"caliban.caliban-ai.dev/v1alpha1","metadata":{"name":"fix-login","namespace":"team-a","uid":"uid-1"},"spec":{"suspend":true}}`},
		"resume sends spec.suspend false rather than omitting it": {on: false,
			want: `{"kind":"CalibanTask","apiVersion":"caliban.caliban-ai.dev/v1alpha1","metadata":{"name":"fix-login","namespace":"team-a","uid":"uid-1"},"spec":{"suspend":false}}`},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(SuspendApply("fix-login", "team-a", "uid-1", test.on))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(test.want, string(got)); diff != "" {
				t.Errorf("apply configuration (-want +got):\n%s", diff)
			}
		})
	}
}

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
