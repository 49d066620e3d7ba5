package harness

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

var t0 = time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func mt(s int) metav1.Time { return metav1.NewTime(at(s)) }

// startObjects are a task, its Sandbox and its pod as the apiserver serves
// them once the task is Running, with each step at the given second.
type startObjects struct {
	task    *calibanv1alpha1.CalibanTask
	sandbox *sandboxv1beta1.Sandbox
	pod     *corev1.Pod
}

func objectsAt(taskCreated, sandboxCreated, podCreated, scheduled, podReady, sandboxReady, running int) startObjects {
	return startObjects{
		task: &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000", CreationTimestamp: mt(taskCreated)},
			Status: calibanv1alpha1.CalibanTaskStatus{
				Phase: calibanv1alpha1.TaskRunning,
				Conditions: []metav1.Condition{{
					Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: mt(running),
				}},
			},
		},
		sandbox: &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000-sbx", CreationTimestamp: mt(sandboxCreated)},
			Status: sandboxv1beta1.SandboxStatus{Conditions: []metav1.Condition{
				// agent-sandbox mirrors the pod's scheduling; only Ready says
				// the Sandbox serves.
				{Type: "PodScheduled", Status: metav1.ConditionTrue, LastTransitionTime: mt(scheduled)},
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady", LastTransitionTime: mt(sandboxReady)},
			}},
		},
		pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000-sbx", CreationTimestamp: mt(podCreated)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: mt(podReady)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: mt(podReady)},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: mt(scheduled)},
			}},
		},
	}
}

func TestStartStagesFromObjects(t *testing.T) {
	cases := map[string]struct {
		objs startObjects
		// edit changes the objects before they are read.
		edit func(*startObjects)
		want startStages
		// wantErr is a part of the error, "" for none.
		wantErr string
	}{
		"a start whose every step is recorded is cut at each step, and the stages add up to the whole": {
			objs: objectsAt(0, 1, 3, 40, 41, 42, 44),
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 2 * time.Second, Scheduling: 37 * time.Second,
				PodStart: 1 * time.Second, ToRunning: 3 * time.Second,
				SandboxReady: 1 * time.Second, Running: 2 * time.Second,
				Total: 44 * time.Second,
			},
		},
		"steps within one second are stages of 0 s, not errors": {
			objs: objectsAt(5, 5, 5, 5, 5, 5, 5),
			want: startStages{},
		},
		"a task that is not Running yet has no start to cut": {
			objs: objectsAt(0, 1, 2, 3, 4, 5, 6),
			edit: func(o *startObjects) {
				o.task.Status.Phase = calibanv1alpha1.TaskProvisioning
				o.task.Status.Conditions[0].Status = metav1.ConditionFalse
			},
			wantErr: "task Running (phase Provisioning)",
		},
		"a pod that carries no PodScheduled condition is left out rather than guessed at": {
			objs: objectsAt(0, 1, 2, 3, 4, 5, 6),
			edit: func(o *startObjects) {
				o.pod.Status.Conditions = o.pod.Status.Conditions[:2]
			},
			wantErr: "no pod PodScheduled",
		},
		"a pod that is not Ready has not started": {
			objs: objectsAt(0, 1, 2, 3, 4, 5, 6),
			edit: func(o *startObjects) {
				o.pod.Status.Conditions[1].Status = corev1.ConditionFalse
			},
			wantErr: "no pod Ready",
		},
		"a Sandbox that is not Ready has no Ready time, whatever its other conditions say": {
			objs: objectsAt(0, 1, 2, 3, 4, 5, 6),
			edit: func(o *startObjects) {
				o.sandbox.Status.Conditions = o.sandbox.Status.Conditions[:1]
			},
			wantErr: "no Sandbox Ready",
		},
		"a task whose pod is gone cannot be cut": {
			objs:    objectsAt(0, 1, 2, 3, 4, 5, 6),
			edit:    func(o *startObjects) { o.pod = nil },
			wantErr: "is missing",
		},
		"a pod bound before it was created means misread stamps, not a negative stage": {
			objs:    objectsAt(0, 1, 10, 9, 11, 12, 13),
			wantErr: "pod scheduled (2026-12-04T16:00:09Z) is before pod created (2026-12-04T16:00:10Z)",
		},
		"a task Running before its pod is Ready means misread stamps": {
			objs:    objectsAt(0, 1, 2, 3, 6, 6, 5),
			wantErr: "task Running (2026-12-04T16:00:05Z) is before pod Ready (2026-12-04T16:00:06Z)",
		},
		"a Sandbox whose Ready came back after its task ran keeps the five stages and loses only the split": {
			objs: objectsAt(0, 1, 2, 3, 4, 7, 5),
			want: startStages{
				Operator: time.Second, AgentSandbox: time.Second, Scheduling: time.Second,
				PodStart: time.Second, ToRunning: time.Second, Total: 5 * time.Second,
				SplitProblem: "task Running (2026-12-04T16:00:05Z) is before Sandbox Ready (2026-12-04T16:00:07Z)",
			},
		},
		"a Sandbox Ready before its pod is Ready cannot split the start either": {
			objs: objectsAt(0, 0, 0, 0, 4, 3, 5),
			want: startStages{
				PodStart: 4 * time.Second, ToRunning: time.Second, Total: 5 * time.Second,
				SplitProblem: "Sandbox Ready (2026-12-04T16:00:03Z) is before pod Ready (2026-12-04T16:00:04Z)",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := tc.objs
			if tc.edit != nil {
				tc.edit(&o)
			}
			s, err := stampsOf(o.task, o.sandbox, o.pod)
			var got startStages
			if err == nil {
				got, err = stagesOf(s)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollectStages(t *testing.T) {
	stamps := func(created, running int, sandboxReady int) startStamps {
		return startStamps{
			TaskCreated: at(created), SandboxCreated: at(created + 1), PodCreated: at(created + 1),
			PodScheduled: at(created + 5), PodReady: at(created + 5), SandboxReady: at(sandboxReady), TaskRunning: at(running),
		}
	}
	cases := map[string]struct {
		stamps []startStamps
		errs   []error
		want   stageSamples
		// wantShare is the operator's share of the mean start, in percent.
		wantShare, wantThroughput float64
	}{
		"tasks that read are gathered stage by stage, and the span runs from the first created to the last Running, in whatever order they come": {
			stamps: []startStamps{stamps(2, 10, 8), stamps(0, 6, 6)},
			errs:   []error{nil, nil},
			want: stageSamples{
				Operator:     []time.Duration{time.Second, time.Second},
				AgentSandbox: []time.Duration{0, 0},
				Scheduling:   []time.Duration{4 * time.Second, 4 * time.Second},
				PodStart:     []time.Duration{0, 0},
				ToRunning:    []time.Duration{3 * time.Second, time.Second},
				SandboxReady: []time.Duration{time.Second, time.Second},
				Running:      []time.Duration{2 * time.Second, 0},
				Total:        []time.Duration{8 * time.Second, 6 * time.Second},
				First:        at(0), Last: at(10),
			},
			// (mean 1 s + mean 1 s) of a mean 7 s start.
			wantShare:      100 * 2.0 / 7,
			wantThroughput: 2.0 / 10,
		},
		"a task whose stamps did not read is counted apart with the first reason, and changes no stage": {
			stamps: []startStamps{{}, stamps(0, 6, 6), stamps(0, 6, 6)},
			errs:   []error{errors.New("task t-00000: no pod Ready"), nil, errors.New("task t-00002: no pod Ready")},
			want: stageSamples{
				Operator:     []time.Duration{time.Second},
				AgentSandbox: []time.Duration{0},
				Scheduling:   []time.Duration{4 * time.Second},
				PodStart:     []time.Duration{0},
				ToRunning:    []time.Duration{time.Second},
				SandboxReady: []time.Duration{time.Second},
				Running:      []time.Duration{0},
				Total:        []time.Duration{6 * time.Second},
				Skipped:      2, Problem: "task t-00000: no pod Ready",
				First: at(0), Last: at(6),
			},
			wantShare:      100 * 1.0 / 6,
			wantThroughput: 1.0 / 6,
		},
		"stamps out of order are counted apart as well": {
			stamps: []startStamps{func() startStamps { s := stamps(0, 6, 6); s.PodScheduled = at(0); return s }()},
			errs:   []error{nil},
			want: stageSamples{
				Skipped: 1, Problem: "pod scheduled (2026-12-04T16:00:00Z) is before pod created (2026-12-04T16:00:01Z)",
			},
		},
		"a task that cannot be split at its Sandbox's Ready counts in the five stages and in the operator's share only by its first stage": {
			stamps: []startStamps{stamps(0, 6, 7), stamps(0, 8, 6)},
			errs:   []error{nil, nil},
			want: stageSamples{
				Operator:     []time.Duration{time.Second, time.Second},
				AgentSandbox: []time.Duration{0, 0},
				Scheduling:   []time.Duration{4 * time.Second, 4 * time.Second},
				PodStart:     []time.Duration{0, 0},
				ToRunning:    []time.Duration{time.Second, 3 * time.Second},
				Total:        []time.Duration{6 * time.Second, 8 * time.Second},
				SandboxReady: []time.Duration{time.Second},
				Running:      []time.Duration{2 * time.Second},
				Unsplit:      1,
				SplitProblem: "task Running (2026-12-04T16:00:06Z) is before Sandbox Ready (2026-12-04T16:00:07Z)",
				First:        at(0), Last: at(8),
			},
			// (mean 1 s + mean 2 s of the split one) of a mean 7 s start.
			wantShare:      100 * 3.0 / 7,
			wantThroughput: 2.0 / 8,
		},
		"a burst that ran within one second has no throughput to give, rather than an infinite one": {
			stamps: []startStamps{{
				TaskCreated: at(3), SandboxCreated: at(3), PodCreated: at(3), PodScheduled: at(3),
				PodReady: at(3), SandboxReady: at(3), TaskRunning: at(3),
			}},
			errs: []error{nil},
			want: stageSamples{
				Operator: []time.Duration{0}, AgentSandbox: []time.Duration{0}, Scheduling: []time.Duration{0},
				PodStart: []time.Duration{0}, ToRunning: []time.Duration{0}, SandboxReady: []time.Duration{0},
				Running: []time.Duration{0}, Total: []time.Duration{0},
				First: at(3), Last: at(3),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := collectStages(tc.stamps, tc.errs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
			if share := got.operatorShare(); !near(share, tc.wantShare) {
				t.Errorf("operator's share %v %%, want %v %%", share, tc.wantShare)
			}
			if tp := got.throughput(); !near(tp, tc.wantThroughput) {
				t.Errorf("throughput %v tasks/s, want %v", tp, tc.wantThroughput)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
