// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

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

func mt(s int) *metav1.Time { t := metav1.NewTime(at(s)); return &t }

// startSteps are the seconds (after t0) at which one task's start went through
// each step.
type startSteps struct {
	taskCreated, sandboxCreated, claimBound, podCreated, scheduled, podReady, sandboxReady, running int
	// claimStatus is when the binder marked the claim Bound in its status,
	// after claimBound (its spec.volumeName); 0 means at claimBound.
	claimStatus int
}

// fields is a managedFields entry's field set, from JSON.
func fields(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }

// startObjects are a task, its Sandbox, its pod and its claim as the
// apiserver serves them once the task is Running.
type startObjects struct {
	task    *calibanv1alpha1.CalibanTask
	sandbox *sandboxv1beta1.Sandbox
	pod     *corev1.Pod
	claim   *corev1.PersistentVolumeClaim
}

func objectsAt(s startSteps) startObjects {
	claimStatus := max(s.claimStatus, s.claimBound)
	return startObjects{
		task: &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000", CreationTimestamp: *mt(s.taskCreated)},
			Status: calibanv1alpha1.CalibanTaskStatus{
				Phase: calibanv1alpha1.TaskRunning,
				Conditions: []metav1.Condition{{
					Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: *mt(s.running),
				}},
			},
		},
		sandbox: &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000-sbx", CreationTimestamp: *mt(s.sandboxCreated)},
			Status: sandboxv1beta1.SandboxStatus{Conditions: []metav1.Condition{
				// agent-sandbox mirrors the pod's scheduling; only Ready says
				// the Sandbox serves.
				{Type: "PodScheduled", Status: metav1.ConditionTrue, LastTransitionTime: *mt(s.scheduled)},
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady", LastTransitionTime: *mt(s.sandboxReady)},
			}},
		},
		pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "t-00000-sbx", CreationTimestamp: *mt(s.podCreated)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: *mt(s.podReady)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: *mt(s.podReady)},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: *mt(s.scheduled)},
			}},
		},
		claim: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: "workspace-t-00000-sbx", CreationTimestamp: *mt(s.sandboxCreated),
				ManagedFields: []metav1.ManagedFieldsEntry{
					{
						Manager: "agent-sandbox-controller", Operation: metav1.ManagedFieldsOperationUpdate, Time: mt(s.sandboxCreated),
						FieldsV1: fields(`{"f:metadata":{"f:labels":{}},"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{"f:storage":{}}}}}`),
					},
					{
						Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Time: mt(s.claimBound),
						FieldsV1: fields(`{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bind-completed":{}}},"f:spec":{"f:volumeName":{}}}`),
					},
					{
						Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: mt(claimStatus),
						FieldsV1: fields(`{"f:status":{"f:phase":{},"f:capacity":{}}}`),
					},
				},
			},
			Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "bench-0"},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		},
	}
}

func TestStartStagesFromObjects(t *testing.T) {
	cases := map[string]struct {
		steps startSteps
		// edit changes the objects before they are read.
		edit func(*startObjects)
		want startStages
		// wantErr is a part of the error, "" for none.
		wantErr string
	}{
		"a start whose every step is recorded is cut at each step, and the stages add up to the whole": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 30, podCreated: 3, scheduled: 40, podReady: 41, sandboxReady: 42, running: 44},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 2 * time.Second, Scheduling: 37 * time.Second,
				PodStart: 1 * time.Second, ToRunning: 3 * time.Second, Total: 44 * time.Second,
				ClaimWait: 27 * time.Second, AfterClaim: 10 * time.Second,
				SandboxReady: 1 * time.Second, Running: 2 * time.Second,
			},
		},
		"steps within one second are stages of 0 s, not errors": {
			steps: startSteps{5, 5, 5, 5, 5, 5, 5, 5, 5},
			want:  startStages{},
		},
		"a claim bound before its pod existed kept the pod waiting for nothing": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 2, podCreated: 4, scheduled: 9, podReady: 9, sandboxReady: 9, running: 9},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 3 * time.Second, Scheduling: 5 * time.Second,
				Total:     9 * time.Second,
				ClaimWait: 0, AfterClaim: 5 * time.Second,
			},
		},
		"a claim whose binder left no record of setting its volume keeps the scheduling stage whole": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 5, podCreated: 2, scheduled: 6, podReady: 6, sandboxReady: 6, running: 6},
			edit: func(o *startObjects) {
				// Only agent-sandbox's create and the status write remain.
				o.claim.ManagedFields = append(o.claim.ManagedFields[:1], o.claim.ManagedFields[2])
			},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 1 * time.Second, Scheduling: 4 * time.Second, Total: 6 * time.Second,
				ClaimProblem: "no time the claim was bound",
			},
		},
		"a claim with no volume is not bound, whatever its managedFields say": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 5, podCreated: 2, scheduled: 6, podReady: 6, sandboxReady: 6, running: 6},
			edit: func(o *startObjects) {
				o.claim.Spec.VolumeName = ""
			},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 1 * time.Second, Scheduling: 4 * time.Second, Total: 6 * time.Second,
				ClaimProblem: "no time the claim was bound",
			},
		},
		"a claim marked Bound in its status only after its pod was scheduled was bound when its volume was set": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 5, claimStatus: 8, podCreated: 2, scheduled: 6, podReady: 6, sandboxReady: 6, running: 6},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 1 * time.Second, Scheduling: 4 * time.Second, Total: 6 * time.Second,
				ClaimWait: 3 * time.Second, AfterClaim: time.Second,
			},
		},
		"a task whose claim was not found loses only the split of its scheduling": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 5, podCreated: 2, scheduled: 6, podReady: 6, sandboxReady: 6, running: 6},
			edit:  func(o *startObjects) { o.claim = nil },
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 1 * time.Second, Scheduling: 4 * time.Second, Total: 6 * time.Second,
				ClaimProblem: "no time the claim was bound",
			},
		},
		"a claim given its volume after its pod was scheduled means misread stamps, and cannot split the scheduling": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 8, podCreated: 2, scheduled: 6, podReady: 6, sandboxReady: 6, running: 6},
			want: startStages{
				Operator: 1 * time.Second, AgentSandbox: 1 * time.Second, Scheduling: 4 * time.Second, Total: 6 * time.Second,
				ClaimProblem: "pod scheduled (2026-12-04T16:00:06Z) is before claim bound (2026-12-04T16:00:08Z)",
			},
		},
		"a Sandbox whose Ready came back after its task ran keeps the five stages and loses only its split": {
			steps: startSteps{taskCreated: 0, sandboxCreated: 1, claimBound: 2, podCreated: 2, scheduled: 3, podReady: 4, sandboxReady: 7, running: 5},
			want: startStages{
				Operator: time.Second, AgentSandbox: time.Second, Scheduling: time.Second,
				PodStart: time.Second, ToRunning: time.Second, Total: 5 * time.Second,
				AfterClaim:     time.Second,
				SandboxProblem: "task Running (2026-12-04T16:00:05Z) is before Sandbox Ready (2026-12-04T16:00:07Z)",
			},
		},
		"a Sandbox Ready before its pod is Ready cannot split the start either": {
			steps: startSteps{podReady: 4, sandboxReady: 3, running: 5},
			want: startStages{
				PodStart: 4 * time.Second, ToRunning: time.Second, Total: 5 * time.Second,
				SandboxProblem: "Sandbox Ready (2026-12-04T16:00:03Z) is before pod Ready (2026-12-04T16:00:04Z)",
			},
		},
		"a Sandbox that is not Ready any more cannot split the start, whatever its other conditions say": {
			steps: startSteps{podReady: 4, sandboxReady: 4, running: 5},
			edit: func(o *startObjects) {
				o.sandbox.Status.Conditions[1].Status = metav1.ConditionFalse
			},
			want: startStages{
				PodStart: 4 * time.Second, ToRunning: time.Second, Total: 5 * time.Second,
				SandboxProblem: "the Sandbox is not Ready",
			},
		},
		"a task that is not Running yet has no start to cut": {
			steps: startSteps{0, 1, 2, 2, 3, 4, 5, 6, 0},
			edit: func(o *startObjects) {
				o.task.Status.Phase = calibanv1alpha1.TaskProvisioning
				o.task.Status.Conditions[0].Status = metav1.ConditionFalse
			},
			wantErr: "task Running (phase Provisioning)",
		},
		"a pod that carries no PodScheduled condition is left out rather than guessed at": {
			steps: startSteps{0, 1, 2, 2, 3, 4, 5, 6, 0},
			edit: func(o *startObjects) {
				o.pod.Status.Conditions = o.pod.Status.Conditions[:2]
			},
			wantErr: "no pod PodScheduled",
		},
		"a pod that is not Ready has not started": {
			steps: startSteps{0, 1, 2, 2, 3, 4, 5, 6, 0},
			edit: func(o *startObjects) {
				o.pod.Status.Conditions[1].Status = corev1.ConditionFalse
			},
			wantErr: "no pod Ready",
		},
		"a task whose pod is gone cannot be cut": {
			steps:   startSteps{0, 1, 2, 2, 3, 4, 5, 6, 0},
			edit:    func(o *startObjects) { o.pod = nil },
			wantErr: "is missing",
		},
		"a pod bound before it was created means misread stamps, not a negative stage": {
			steps:   startSteps{taskCreated: 0, sandboxCreated: 1, podCreated: 10, scheduled: 9, podReady: 11, sandboxReady: 12, running: 13},
			wantErr: "pod scheduled (2026-12-04T16:00:09Z) is before pod created (2026-12-04T16:00:10Z)",
		},
		"a task Running before its pod is Ready means misread stamps": {
			steps:   startSteps{taskCreated: 0, sandboxCreated: 1, podCreated: 2, scheduled: 3, podReady: 6, sandboxReady: 6, running: 5},
			wantErr: "task Running (2026-12-04T16:00:05Z) is before pod Ready (2026-12-04T16:00:06Z)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := objectsAt(tc.steps)
			if tc.edit != nil {
				tc.edit(&o)
			}
			s, err := stampsOf(o.task, o.sandbox, o.pod, o.claim)
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
	// stamps is a start whose claim is bound as its pod is created, 4 s
	// before the pod is scheduled and Ready.
	stamps := func(created, running, sandboxReady int) startStamps {
		return startStamps{
			TaskCreated: at(created), SandboxCreated: at(created + 1), PodCreated: at(created + 1), ClaimBound: at(created + 1),
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
				Total:        []time.Duration{8 * time.Second, 6 * time.Second},
				ClaimWait:    []time.Duration{0, 0},
				AfterClaim:   []time.Duration{4 * time.Second, 4 * time.Second},
				SandboxReady: []time.Duration{time.Second, time.Second},
				Running:      []time.Duration{2 * time.Second, 0},
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
				Total:        []time.Duration{6 * time.Second},
				ClaimWait:    []time.Duration{0},
				AfterClaim:   []time.Duration{4 * time.Second},
				SandboxReady: []time.Duration{time.Second},
				Running:      []time.Duration{0},
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
		"tasks that cannot be split count in the five stages, and in the operator's share only by what they have": {
			stamps: []startStamps{
				stamps(0, 6, 7),
				stamps(0, 8, 6),
				func() startStamps { s := stamps(0, 6, 6); s.ClaimBound = time.Time{}; return s }(),
			},
			errs: []error{nil, nil, nil},
			want: stageSamples{
				Operator:       []time.Duration{time.Second, time.Second, time.Second},
				AgentSandbox:   []time.Duration{0, 0, 0},
				Scheduling:     []time.Duration{4 * time.Second, 4 * time.Second, 4 * time.Second},
				PodStart:       []time.Duration{0, 0, 0},
				ToRunning:      []time.Duration{time.Second, 3 * time.Second, time.Second},
				Total:          []time.Duration{6 * time.Second, 8 * time.Second, 6 * time.Second},
				ClaimWait:      []time.Duration{0, 0},
				AfterClaim:     []time.Duration{4 * time.Second, 4 * time.Second},
				NoClaimSplit:   1,
				ClaimProblem:   "no time the claim was bound",
				SandboxReady:   []time.Duration{time.Second, time.Second},
				Running:        []time.Duration{2 * time.Second, 0},
				NoSandboxSplit: 1,
				SandboxProblem: "task Running (2026-12-04T16:00:06Z) is before Sandbox Ready (2026-12-04T16:00:07Z)",
				First:          at(0), Last: at(8),
			},
			// (mean 1 s + mean 1 s of the two split ones) of a mean 20/3 s start.
			wantShare:      100 * 2.0 / (20.0 / 3),
			wantThroughput: 3.0 / 8,
		},
		"a burst that ran within one second has no throughput to give, rather than an infinite one": {
			stamps: []startStamps{{
				TaskCreated: at(3), SandboxCreated: at(3), PodCreated: at(3), ClaimBound: at(3), PodScheduled: at(3),
				PodReady: at(3), SandboxReady: at(3), TaskRunning: at(3),
			}},
			errs: []error{nil},
			want: stageSamples{
				Operator: []time.Duration{0}, AgentSandbox: []time.Duration{0}, Scheduling: []time.Duration{0},
				PodStart: []time.Duration{0}, ToRunning: []time.Duration{0}, Total: []time.Duration{0},
				ClaimWait: []time.Duration{0}, AfterClaim: []time.Duration{0},
				SandboxReady: []time.Duration{0}, Running: []time.Duration{0},
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
