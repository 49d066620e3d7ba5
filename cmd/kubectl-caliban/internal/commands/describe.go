// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/diagnose"
)

// NewDescribe is `describe TASK`: one screen about the task.
func NewDescribe(o *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TASK",
		Short: "Show a task, its pin, its children, its pod, its conditions and Events, and what it waits for",
		Example: `  kubectl caliban describe fix-login
  kubectl caliban -n team-a describe fix-login`,
		Args: cli.ExactlyOneTask,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := snapshot(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			return Describe(o.Streams.Out, s, o.Now())
		},
	}
}

// maxEvents is how many of the newest Events describe lists per object.
const maxEvents = 10

// conditionOwner is who writes each task condition
// (docs/crd-reference.md#status-ownership).
var conditionOwner = map[string]string{
	builders.ConditionReady:         "caliban-operator",
	builders.ConditionAgentsSettled: "prospero",
	builders.ConditionAgentsDrained: "prospero",
}

// Describe writes one screen about the task of s, ending with the line
// why prints. now dates the ages.
func Describe(w io.Writer, s *Snapshot, now time.Time) error {
	task := s.Task
	// Each section is aligned on its own: a new tab writer per section,
	// flushed when the next one starts.
	tw := printers.GetNewTabWriter(w)
	// Every value printed goes through printableArgs: the formats are the
	// plugin's, the values the cluster's.
	line := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", printableArgs(args)...) }
	section := func(format string, args ...any) {
		_ = tw.Flush()
		tw = printers.GetNewTabWriter(w)
		line(format, args...)
	}

	line("Name:\t%s", task.Name)
	line("Namespace:\t%s", task.Namespace)
	line("Phase:\t%s", orNone(string(task.Status.Phase)))
	line("Suspend:\t%t", task.Spec.Suspend)
	line("Created:\t%s (%s ago)", stamp(task.CreationTimestamp), age(task.CreationTimestamp, now))
	if task.DeletionTimestamp != nil {
		line("Deleting since:\t%s (%s ago)", stamp(*task.DeletionTimestamp), age(*task.DeletionTimestamp, now))
	}
	if task.Status.CalibandEndpoint != "" {
		line("Endpoint:\t%s", task.Status.CalibandEndpoint)
	}

	section("Pin:")
	line("  Workspace:\t%s%s", task.Spec.WorkspaceRef.Name, workspaceState(s))
	if pin := task.Status.ResolvedWorkspace; pin != nil {
		line("  Provider:\t%s (kind %s)", pin.Provider.Name, pin.Provider.Kind)
		line("  Model:\t%s", orNone(pin.Provider.Model))
		line("  Sources:\t%d", len(pin.Sources))
	} else {
		line("  Provider:\t<not pinned: the task is not admitted>")
	}
	if l := task.Status.Launch; l != nil {
		line("  Launch:\t%s (%s: %s)", l.Type, l.Reason, l.Message)
	}
	line("  Posture:\t%s (requested %s)", orNone(string(task.Status.PermissionPosture)), orDefault(string(task.Spec.Task.PermissionPosture), "supervised"))
	line("  Requested by:\t%s", orNone(task.Status.RequestedBy))
	if task.Status.StartTime != nil {
		line("  Started:\t%s", stamp(*task.Status.StartTime))
	}
	if task.Status.CompletionTime != nil {
		line("  Finished:\t%s", stamp(*task.Status.CompletionTime))
	}

	section("Children:")
	sandboxName := diagnose.SandboxName(task)
	if sb := s.Sandbox; sb != nil {
		state := "operatingMode " + orDefault(string(sb.Spec.OperatingMode), "Running")
		if c := meta.FindStatusCondition(sb.Status.Conditions, builders.ConditionReady); c != nil {
			state += fmt.Sprintf(", Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
		}
		line("  Sandbox\t%s\t%s", sb.Name, state)
	} else if sandboxName == "" {
		line("  Sandbox\t<none yet>\tthe claim holds no Sandbox yet")
	} else {
		line("  Sandbox\t%s\tnot found", sandboxName)
	}
	if builders.IsWarm(task) {
		claim := builders.ClaimName(task.Name)
		if c := task.Status.Launch.Claim; c != nil {
			claim = c.Name
		}
		line("  SandboxClaim\t%s\ton warm pool %s", claim, builders.WarmPoolName(task.Spec.WorkspaceRef.Name))
		for _, d := range s.Duplicates {
			state := "the operator deletes it"
			if d.DeletionTimestamp != nil {
				state = "being deleted"
			}
			line("  Sandbox\t%s\ta second Sandbox of claim %s (an agent-sandbox adoption race); %s", d.Name, claim, state)
		}
		if n := countReason(s.TaskEvents, builders.ReasonDuplicateSandboxRemoved); n > 0 {
			line("  Duplicates\t%d removed\tSandboxes agent-sandbox made for the claim beside the task's (Events %s)", n, builders.ReasonDuplicateSandboxRemoved)
		}
		line("  ServiceAccount\t%s\t%s (the warm pool's: a warm pod runs as its pool's, token-less like a task's own)", serviceAccountOf(task), exists(s.ServiceAccount != nil))
	} else {
		line("  ServiceAccount\t%s\t%s", builders.ServiceAccountName(task.Name), exists(s.ServiceAccount != nil))
	}
	line("  NetworkPolicy\t%s\t%s", builders.NetworkPolicyName(task.Name), exists(s.NetworkPolicy != nil))

	if s.Sandbox != nil && len(s.Sandbox.Status.Conditions) > 0 {
		section("Sandbox conditions:")
		line("  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range s.Sandbox.Status.Conditions {
			line("  %s\t%s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), c.Message)
		}
	}

	podName := diagnose.PodName(task, s.Sandbox)
	if p := s.Pod; p != nil {
		section("Pod %s: %s", p.Name, podSummary(p))
		if len(p.Spec.InitContainers) > 0 {
			line("  Init containers:")
			for _, c := range p.Spec.InitContainers {
				line("    %s\t%s", c.Name, containerState(p.Status.InitContainerStatuses, c.Name))
			}
		}
		line("  Containers:")
		for _, c := range p.Spec.Containers {
			line("    %s\t%s", c.Name, containerState(p.Status.ContainerStatuses, c.Name))
		}
	} else {
		section("Pod %s: not found", podName)
	}

	section("Conditions:")
	if len(task.Status.Conditions) == 0 {
		line("  <none>")
	} else {
		line("  TYPE\tSTATUS\tREASON\tOWNER\tAGE\tMESSAGE")
		for _, c := range task.Status.Conditions {
			line("  %s\t%s\t%s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, orDefault(conditionOwner[c.Type], "<unknown>"), age(c.LastTransitionTime, now), c.Message)
		}
	}

	section("Events:")
	events := append(lastEvents(s.TaskEvents, "CalibanTask/"+task.Name), lastEvents(s.PodEvents, "Pod/"+podName)...)
	if len(events) == 0 {
		line("  <none>")
	} else {
		line("  AGE\tTYPE\tREASON\tOBJECT\tNOTE")
		for _, e := range events {
			line("  %s\t%s\t%s\t%s\t%s", age(diagnose.EventTime(e.Event), now), e.Type, e.Reason, e.object, oneLine(e.Note))
		}
	}
	for _, p := range s.Problems {
		section("Could not read: %s", p)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, cli.Printable(s.Diagnosis().Line()))
	return err
}

// printableArgs is args with every string (of any string type: a phase, a
// condition status, a UID) escaped for the terminal (cli.Printable).
func printableArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if v := reflect.ValueOf(a); v.Kind() == reflect.String {
			a = cli.Printable(v.String())
		}
		out[i] = a
	}
	return out
}

func workspaceState(s *Snapshot) string {
	ws := s.Workspace
	switch {
	case ws == nil:
		return " (not found)"
	case ws.Status.Phase == "":
		return " (not validated yet)"
	case ws.Status.Message != "":
		return fmt.Sprintf(" (%s: %s)", ws.Status.Phase, ws.Status.Message)
	}
	return fmt.Sprintf(" (%s)", ws.Status.Phase)
}

func podSummary(p *corev1.Pod) string {
	out := string(p.Status.Phase)
	if p.Spec.NodeName != "" {
		out += " on node " + p.Spec.NodeName
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out += ", Ready=" + string(c.Status)
		}
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out += fmt.Sprintf(", not scheduled (%s: %s)", c.Reason, c.Message)
		}
	}
	return out
}

// containerState is a container's state as kubectl describe words it.
func containerState(statuses []corev1.ContainerStatus, name string) string {
	for _, s := range statuses {
		if s.Name != name {
			continue
		}
		var out string
		switch st := s.State; {
		case st.Running != nil:
			out = "Running"
			if s.Ready {
				out += ", ready"
			} else {
				out += ", not ready"
			}
		case st.Waiting != nil:
			out = "Waiting: " + st.Waiting.Reason
			if st.Waiting.Message != "" {
				out += " (" + oneLine(st.Waiting.Message) + ")"
			}
		case st.Terminated != nil:
			out = fmt.Sprintf("Terminated: %s, exit code %d", st.Terminated.Reason, st.Terminated.ExitCode)
			if st.Terminated.Message != "" {
				out += " (" + oneLine(st.Terminated.Message) + ")"
			}
		default:
			out = "no state"
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			out += fmt.Sprintf("; last: %s, exit code %d", t.Reason, t.ExitCode)
			if t.Message != "" {
				out += " (" + oneLine(t.Message) + ")"
			}
		}
		if s.RestartCount > 0 {
			out += fmt.Sprintf("; restarts %d", s.RestartCount)
		}
		return out
	}
	return "not started"
}

// countReason counts the events of reason, each as often as it happened.
func countReason(events []eventsv1.Event, reason string) int {
	n := 0
	for _, e := range events {
		if e.Reason != reason {
			continue
		}
		if e.Series != nil && e.Series.Count > 0 {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

type namedEvent struct {
	eventsv1.Event
	object string
}

func lastEvents(events []eventsv1.Event, object string) []namedEvent {
	if len(events) > maxEvents {
		events = events[len(events)-maxEvents:]
	}
	out := make([]namedEvent, 0, len(events))
	for _, e := range events {
		out = append(out, namedEvent{Event: e, object: object})
	}
	return out
}

func stamp(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func exists(ok bool) string {
	if ok {
		return "exists"
	}
	return "not found"
}

func orNone(s string) string { return orDefault(s, "<none>") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
