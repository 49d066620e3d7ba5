package harness

import (
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
	SandboxReady time.Time // the Sandbox's Ready condition turning True (agent-sandbox)
	TaskRunning  time.Time // the task's Ready condition turning True with Running (the operator)
}

// startStages are a task's start cut at its stamps. Operator, AgentSandbox,
// Scheduling, PodStart and ToRunning follow each other and add up to Total;
// ToRunning is split again at the Sandbox's Ready into SandboxReady and
// Running, because the first half is agent-sandbox's work and only the
// second the operator's. The split needs the Sandbox's Ready transition to
// lie between the pod's Ready and the task's Running; when it does not
// (the condition records its last transition, and a Sandbox whose Ready
// went away and came back after the task ran has a later one), SplitProblem
// says so and the two halves are zero, but the five stages stand.
type startStages struct {
	Operator     time.Duration // task created → Sandbox created: the operator's first sync
	AgentSandbox time.Duration // Sandbox created → pod created: agent-sandbox
	Scheduling   time.Duration // pod created → bound: the claim bound by the controller-manager, then the scheduler
	PodStart     time.Duration // bound → pod Ready: kwok plays the kubelet
	ToRunning    time.Duration // pod Ready → task Running
	SandboxReady time.Duration // pod Ready → Sandbox Ready: agent-sandbox
	Running      time.Duration // Sandbox Ready → task Running: the operator's second sync
	Total        time.Duration // task created → task Running
	SplitProblem string
}

// stampsOf reads the stamps of a Running task, its Sandbox and the
// Sandbox's pod. It fails when one is missing: a stage read from a zero
// time would be decades long.
func stampsOf(task *calibanv1alpha1.CalibanTask, sb *sandboxv1beta1.Sandbox, pod *corev1.Pod) (startStamps, error) {
	var s startStamps
	if task == nil || sb == nil || pod == nil {
		return s, errors.New("the task, its Sandbox or its pod is missing")
	}
	s.TaskCreated = task.CreationTimestamp.Time
	s.SandboxCreated = sb.CreationTimestamp.Time
	s.PodCreated = pod.CreationTimestamp.Time

	var missing []string
	if c := meta.FindStatusCondition(task.Status.Conditions, builders.ConditionReady); task.Status.Phase == calibanv1alpha1.TaskRunning && c != nil && c.Status == metav1.ConditionTrue {
		s.TaskRunning = c.LastTransitionTime.Time
	} else {
		missing = append(missing, "task Running (phase "+string(task.Status.Phase)+")")
	}
	if c := meta.FindStatusCondition(sb.Status.Conditions, builders.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		s.SandboxReady = c.LastTransitionTime.Time
	} else {
		missing = append(missing, "Sandbox Ready")
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

// stagesOf cuts a task's start at its stamps. Stamps out of order (a pod
// bound before it was created) mean they were misread, or came from clocks
// that disagree, and every stage would be suspect: that is an error, not a
// negative stage.
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
	if err := inOrder(step{"pod Ready", s.PodReady}, step{"Sandbox Ready", s.SandboxReady}, step{"task Running", s.TaskRunning}); err != nil {
		st.SplitProblem = err.Error()
		return st, nil
	}
	st.SandboxReady = s.SandboxReady.Sub(s.PodReady)
	st.Running = s.TaskRunning.Sub(s.SandboxReady)
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
	// SandboxReady and Running hold only the tasks whose start could be
	// split at the Sandbox's Ready.
	SandboxReady, Running []time.Duration
	// Skipped tasks had a stamp missing or out of order; Problem is the
	// first such reason, for the report.
	Skipped int
	Problem string
	// Unsplit tasks count in the five stages but not in the split of pod
	// Ready → task Running; SplitProblem is the first reason.
	Unsplit      int
	SplitProblem string
	// First and Last are the earliest task creation and the latest task
	// Running among the tasks counted: the burst's span as the objects
	// record it.
	First, Last time.Time
}

// collectStages gathers the stages of every task whose stamps read; errs
// holds the reading errors of the others (one per task, nil when it read).
func collectStages(stamps []startStamps, errs []error) stageSamples {
	var out stageSamples
	for i, s := range stamps {
		err := errs[i]
		var st startStages
		if err == nil {
			st, err = stagesOf(s)
		}
		if err != nil {
			if out.Skipped == 0 {
				out.Problem = err.Error()
			}
			out.Skipped++
			continue
		}
		out.Operator = append(out.Operator, st.Operator)
		out.AgentSandbox = append(out.AgentSandbox, st.AgentSandbox)
		out.Scheduling = append(out.Scheduling, st.Scheduling)
		out.PodStart = append(out.PodStart, st.PodStart)
		out.ToRunning = append(out.ToRunning, st.ToRunning)
		out.Total = append(out.Total, st.Total)
		if st.SplitProblem == "" {
			out.SandboxReady = append(out.SandboxReady, st.SandboxReady)
			out.Running = append(out.Running, st.Running)
		} else {
			if out.Unsplit == 0 {
				out.SplitProblem = st.SplitProblem
			}
			out.Unsplit++
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
