// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// startStamps are the moments of one task's start as its objects record
// them. Kubernetes serialises every one of them in whole seconds (RFC3339;
// even protobuf drops the nanoseconds of a metav1.Time), truncated, so a
// stage computed from two of them is off by less than a second either way.
type startStamps struct {
	TaskCreated    time.Time // the task's creationTimestamp (apiserver)
	SandboxCreated time.Time // the Sandbox's creationTimestamp
	PodCreated     time.Time // the pod's creationTimestamp
	// PodScheduled is when the pod was bound to a node: its PodScheduled
	// condition, which the binding sets to True.
	PodScheduled time.Time
	PodReady     time.Time // the pod's Ready condition turning True (kwok's pod-ready Stage)
	TaskRunning  time.Time // the task's Ready condition turning True with Running (the operator)

	// The two below only split stages; zero when unknown.

	// ClaimBound is when the pod's workspace claim was bound to a volume.
	ClaimBound time.Time
	// SandboxReady is the Sandbox's Ready condition turning True
	// (agent-sandbox).
	SandboxReady time.Time
}

// startStages are a task's start cut at its stamps. Operator, AgentSandbox,
// Scheduling, PodStart and ToRunning follow each other and add up to Total.
// Two of them are split again where the objects allow:
//
//   - Scheduling at the claim's binding, into ClaimWait (the pod waiting
//     for the controller-manager's volume binder; zero when the claim was
//     bound before the pod existed) and AfterClaim (the scheduler, from
//     then until it bound the pod), because a pod with an unbound claim is
//     unschedulable and the two are different components' time;
//   - ToRunning at the Sandbox's Ready, into SandboxReady (agent-sandbox)
//     and Running (the operator's second sync), because only the second is
//     the operator's.
//
// A split needs its stamp to lie within the stage; when it does not, or is
// unknown, ClaimProblem or SandboxProblem says why, its halves are zero,
// and the five stages stand. The Sandbox's Ready condition records its last
// transition: a Sandbox whose Ready went away and came back after its task
// ran has one later than the task's Running.
type startStages struct {
	Operator     time.Duration // task created → Sandbox created: the operator's first sync
	AgentSandbox time.Duration // Sandbox created → pod created: agent-sandbox
	Scheduling   time.Duration // pod created → pod bound to a node
	PodStart     time.Duration // bound → pod Ready: kwok plays the kubelet
	ToRunning    time.Duration // pod Ready → task Running
	Total        time.Duration // task created → task Running

	ClaimWait, AfterClaim time.Duration
	ClaimProblem          string
	SandboxReady, Running time.Duration
	SandboxProblem        string
}

// stampsOf reads the stamps of a Running task, its Sandbox, the Sandbox's
// pod and its workspace claim (which may be nil: it only splits a stage).
// It fails when a stamp of the five stages is missing: a stage read from a
// zero time would be decades long.
func stampsOf(task *calibanv1alpha1.CalibanTask, sb *sandboxv1beta1.Sandbox, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim) (startStamps, error) {
	var s startStamps
	if task == nil || sb == nil || pod == nil {
		return s, errors.New("the task, its Sandbox or its pod is missing")
	}
	s.TaskCreated = task.CreationTimestamp.Time
	s.SandboxCreated = sb.CreationTimestamp.Time
	s.PodCreated = pod.CreationTimestamp.Time
	if c := meta.FindStatusCondition(sb.Status.Conditions, builders.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		s.SandboxReady = c.LastTransitionTime.Time
	}
	s.ClaimBound = claimBoundAt(claim)

	var missing []string
	if c := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady); task.Status.Phase == calibanv1alpha1.TaskRunning && c != nil && c.Status == metav1.ConditionTrue {
		s.TaskRunning = c.LastTransitionTime.Time
	} else {
		missing = append(missing, "task Running (phase "+string(task.Status.Phase)+")")
	}
	if t, ok := podConditionTrueSince(pod, corev1.PodScheduled); ok {
		s.PodScheduled = t
	} else {
		missing = append(missing, "pod PodScheduled")
	}
	if t, ok := podConditionTrueSince(pod, corev1.PodReady); ok {
		s.PodReady = t
	} else {
		missing = append(missing, "pod Ready")
	}
	for _, t := range []time.Time{s.TaskCreated, s.SandboxCreated, s.PodCreated} {
		if t.IsZero() {
			missing = append(missing, "a creationTimestamp")
			break
		}
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("no %s", strings.Join(missing, ", "))
	}
	return s, nil
}

// claimBoundAt is when the claim was bound to its volume as the scheduler
// sees it, zero if the claim is nil, not bound, or carries no record of
// it. A claim has no condition for binding. The controller-manager's
// volume binder binds in two writes: spec.volumeName with the
// bind-completed annotation, which is what the scheduler waits for, then
// the status phase Bound, which can land after the pod is already
// scheduled. managedFields keeps the time of each manager's last write to
// the object and to its status apart, so the time wanted is that of the
// entry, not of the status, that owns spec.volumeName.
func claimBoundAt(claim *corev1.PersistentVolumeClaim) time.Time {
	if claim == nil || claim.Spec.VolumeName == "" {
		return time.Time{}
	}
	for _, f := range claim.ManagedFields {
		if f.Subresource != "" || f.Time == nil || f.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(f.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields.Spec["f:volumeName"]; ok {
			return f.Time.Time
		}
	}
	return time.Time{}
}

// podConditionTrueSince is when the pod's condition of type t turned True,
// if it is True and says so. PodScheduled is set True by the binding
// itself, so its transition is the moment of binding, also for a pod the
// scheduler first marked Unschedulable while its claim was unbound; there
// is no other record of that moment on the pod (the binding writes no
// managedFields entry), so a pod without it is left out rather than
// guessed at.
func podConditionTrueSince(pod *corev1.Pod, t corev1.PodConditionType) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// stagesOf cuts a task's start at its stamps. Stamps of the five stages
// out of order (a pod bound before it was created) mean they were misread,
// or came from clocks that disagree, and every stage would be suspect:
// that is an error, not a negative stage.
func stagesOf(s startStamps) (startStages, error) {
	if err := inOrder(
		step{"task created", s.TaskCreated},
		step{"Sandbox created", s.SandboxCreated},
		step{"pod created", s.PodCreated},
		step{"pod scheduled", s.PodScheduled},
		step{"pod Ready", s.PodReady},
		step{"task Running", s.TaskRunning},
	); err != nil {
		return startStages{}, err
	}
	st := startStages{
		Operator:     s.SandboxCreated.Sub(s.TaskCreated),
		AgentSandbox: s.PodCreated.Sub(s.SandboxCreated),
		Scheduling:   s.PodScheduled.Sub(s.PodCreated),
		PodStart:     s.PodReady.Sub(s.PodScheduled),
		ToRunning:    s.TaskRunning.Sub(s.PodReady),
		Total:        s.TaskRunning.Sub(s.TaskCreated),
	}

	// A claim bound before its pod existed kept the pod waiting for
	// nothing: the wait starts at the later of the two.
	claimed := s.ClaimBound
	if claimed.Before(s.PodCreated) {
		claimed = s.PodCreated
	}
	switch {
	case s.ClaimBound.IsZero():
		st.ClaimProblem = "no time the claim was bound"
	default:
		if err := inOrder(step{"claim bound", claimed}, step{"pod scheduled", s.PodScheduled}); err != nil {
			st.ClaimProblem = err.Error()
			break
		}
		st.ClaimWait = claimed.Sub(s.PodCreated)
		st.AfterClaim = s.PodScheduled.Sub(claimed)
	}

	switch {
	case s.SandboxReady.IsZero():
		st.SandboxProblem = "the Sandbox is not Ready"
	default:
		if err := inOrder(step{"pod Ready", s.PodReady}, step{"Sandbox Ready", s.SandboxReady}, step{"task Running", s.TaskRunning}); err != nil {
			st.SandboxProblem = err.Error()
			break
		}
		st.SandboxReady = s.SandboxReady.Sub(s.PodReady)
		st.Running = s.TaskRunning.Sub(s.SandboxReady)
	}
	return st, nil
}

type step struct {
	name string
	at   time.Time
}

// inOrder fails on the first step that comes before the one ahead of it.
func inOrder(steps ...step) error {
	for i := 1; i < len(steps); i++ {
		if steps[i].at.Before(steps[i-1].at) {
			return fmt.Errorf("%s (%s) is before %s (%s)",
				steps[i].name, steps[i].at.Format(time.RFC3339), steps[i-1].name, steps[i-1].at.Format(time.RFC3339))
		}
	}
	return nil
}

// stageSamples are the stages of many tasks, one slice per stage, with the
// tasks whose stamps could not be read counted apart.
type stageSamples struct {
	Operator, AgentSandbox, Scheduling, PodStart, ToRunning, Total []time.Duration
	// The halves of a split hold only the tasks it could be made for;
	// NoClaimSplit and NoSandboxSplit count the others, and the problems
	// are the first reason of each.
	ClaimWait, AfterClaim []time.Duration
	NoClaimSplit          int
	ClaimProblem          string
	SandboxReady, Running []time.Duration
	NoSandboxSplit        int
	SandboxProblem        string
	// Skipped tasks had a stamp of the five stages missing or out of
	// order; Problem is the first such reason, for the report.
	Skipped int
	Problem string
	// First and Last are the earliest task creation and the latest task
	// Running among the tasks counted: the burst's span as the objects
	// record it.
	First, Last time.Time
}

// collectStages gathers the stages of every task whose stamps read; errs
// holds the reading errors of the others (one per task, nil when it read).
func collectStages(stamps []startStamps, errs []error) stageSamples {
	var out stageSamples
	firstProblem := func(count *int, problem *string, p string) {
		if *count == 0 {
			*problem = p
		}
		*count++
	}
	for i, s := range stamps {
		err := errs[i]
		var st startStages
		if err == nil {
			st, err = stagesOf(s)
		}
		if err != nil {
			firstProblem(&out.Skipped, &out.Problem, err.Error())
			continue
		}
		out.Operator = append(out.Operator, st.Operator)
		out.AgentSandbox = append(out.AgentSandbox, st.AgentSandbox)
		out.Scheduling = append(out.Scheduling, st.Scheduling)
		out.PodStart = append(out.PodStart, st.PodStart)
		out.ToRunning = append(out.ToRunning, st.ToRunning)
		out.Total = append(out.Total, st.Total)
		if st.ClaimProblem == "" {
			out.ClaimWait = append(out.ClaimWait, st.ClaimWait)
			out.AfterClaim = append(out.AfterClaim, st.AfterClaim)
		} else {
			firstProblem(&out.NoClaimSplit, &out.ClaimProblem, st.ClaimProblem)
		}
		if st.SandboxProblem == "" {
			out.SandboxReady = append(out.SandboxReady, st.SandboxReady)
			out.Running = append(out.Running, st.Running)
		} else {
			firstProblem(&out.NoSandboxSplit, &out.SandboxProblem, st.SandboxProblem)
		}
		if out.First.IsZero() || s.TaskCreated.Before(out.First) {
			out.First = s.TaskCreated
		}
		if s.TaskRunning.After(out.Last) {
			out.Last = s.TaskRunning
		}
	}
	return out
}

// mean is the mean of ds in seconds. Truncating both ends of a stage to
// the second does not bias it when the sub-second phase of events is
// uniform, so means of whole-second stages are finer than their
// percentiles.
func mean(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum.Seconds() / float64(len(ds))
}

// operatorShare is the operator's part of the mean start: its first sync
// (task created → Sandbox created) and its second (Sandbox Ready → task
// Running, over the tasks that could be split there), in percent of the
// mean create → Running.
func (s stageSamples) operatorShare() float64 {
	total := mean(s.Total)
	if total == 0 {
		return 0
	}
	return 100 * (mean(s.Operator) + mean(s.Running)) / total
}

// throughput is tasks per second over the burst's span as the objects
// record it, 0 when it is shorter than their resolution.
func (s stageSamples) throughput() float64 {
	span := s.Last.Sub(s.First)
	if span <= 0 {
		return 0
	}
	return float64(len(s.Total)) / span.Seconds()
}

// seconds is the nearest-rank percentile q of ds, in seconds.
func seconds(ds []time.Duration, q float64) float64 {
	return percentile(ds, q) / 1000
}

// byOwner indexes objects by the name of their controlling owner of kind.
func byOwner[T any](items []T, kind string, meta func(*T) *metav1.ObjectMeta) map[string]*T {
	out := map[string]*T{}
	for i := range items {
		m := meta(&items[i])
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil && ref.Kind == kind {
			out[ref.Name] = &items[i]
		}
	}
	return out
}
