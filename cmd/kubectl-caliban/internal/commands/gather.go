// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/diagnose"
)

// Snapshot is everything describe and why read about one task. A nil
// object was not found; an object that could not be read for another
// reason is nil too, with the reason in Problems, so one forbidden read
// (a user may not read Sandboxes or Events) does not hide the rest.
type Snapshot struct {
	Task      *calibanv1alpha1.CalibanTask
	Workspace *calibanv1alpha1.Workspace
	Sandbox   *sandboxv1beta1.Sandbox
	// Duplicates are the Sandboxes a warm task's claim controls beside the
	// task's own: agent-sandbox v1.0.3 can make one in an adoption race,
	// and the operator deletes it (docs/warm-start.md#duplicates).
	Duplicates     []sandboxv1beta1.Sandbox
	ServiceAccount *corev1.ServiceAccount
	NetworkPolicy  *networkingv1.NetworkPolicy
	Pod            *corev1.Pod
	// TaskEvents and PodEvents regard the task and its pod, oldest first.
	TaskEvents, PodEvents []eventsv1.Event
	// Problems are the reads that failed other than by not found.
	Problems []string
}

// Diagnosis is what the task waits for.
func (s *Snapshot) Diagnosis() diagnose.Diagnosis {
	return diagnose.Task(diagnose.Input{
		Task: s.Task, Workspace: s.Workspace, Sandbox: s.Sandbox, Pod: s.Pod,
		Events: append(append([]eventsv1.Event(nil), s.TaskEvents...), s.PodEvents...),
	})
}

// connect is the clients and the namespace of a command about one task.
func connect(o *cli.Options) (*cli.Clients, string, error) {
	c, err := o.Clients()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.Namespace()
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// readTask reads the named task in the command's namespace, with the
// clients that read it.
func readTask(ctx context.Context, o *cli.Options, name string) (*cli.Clients, *calibanv1alpha1.CalibanTask, error) {
	c, ns, err := connect(o)
	if err != nil {
		return nil, nil, err
	}
	task, err := getTask(ctx, c, ns, name)
	if err != nil {
		return nil, nil, err
	}
	return c, task, nil
}

// snapshot gathers the named task in the command's namespace.
func snapshot(ctx context.Context, o *cli.Options, name string) (*Snapshot, error) {
	c, ns, err := connect(o)
	if err != nil {
		return nil, err
	}
	return gather(ctx, c, ns, name)
}

// getTask reads one task; not found is a usage error.
func getTask(ctx context.Context, c *cli.Clients, ns, name string) (*calibanv1alpha1.CalibanTask, error) {
	task, err := c.Caliban.CalibanTasks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, cli.APIError(err, "getting CalibanTask %s/%s", ns, name)
	}
	return task, nil
}

// getSandbox reads the task's Sandbox. Not found is an answer, not a
// failure: agent-sandbox's API may not be served, or a warm task's claim
// may hold no Sandbox yet.
func getSandbox(ctx context.Context, c *cli.Clients, task *calibanv1alpha1.CalibanTask) (*sandboxv1beta1.Sandbox, error) {
	name := diagnose.SandboxName(task)
	if name == "" {
		return nil, apierrors.NewNotFound(sandboxv1beta1.Resource(builders.SandboxResource), "")
	}
	return c.Agents.Sandboxes(task.Namespace).Get(ctx, name, metav1.GetOptions{})
}

// gather reads the task and everything around it.
func gather(ctx context.Context, c *cli.Clients, ns, name string) (*Snapshot, error) {
	task, err := getTask(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Task: task}
	// keep records a read's result: not found leaves the object nil.
	keep := func(what string, err error) bool {
		switch {
		case err == nil:
			return true
		case apierrors.IsNotFound(err):
		default:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", what, err))
		}
		return false
	}
	if ws, err := c.Caliban.Workspaces(ns).Get(ctx, task.Spec.WorkspaceRef.Name, metav1.GetOptions{}); keep("Workspace", err) {
		s.Workspace = ws
	}
	sb, err := getSandbox(ctx, c, task)
	if keep("Sandbox", err) {
		s.Sandbox = sb
	}
	s.Duplicates = duplicates(ctx, c, task, keep)
	if sa, err := c.Core.ServiceAccounts(ns).Get(ctx, serviceAccountOf(task), metav1.GetOptions{}); keep("ServiceAccount", err) {
		s.ServiceAccount = sa
	}
	if np, err := c.Networking.NetworkPolicies(ns).Get(ctx, builders.NetworkPolicyName(task.Name), metav1.GetOptions{}); keep("NetworkPolicy", err) {
		s.NetworkPolicy = np
	}
	// A warm task's claim may hold no Sandbox yet, so there is no pod to
	// name.
	if podName := diagnose.PodName(task, s.Sandbox); podName != "" {
		if p, err := c.Core.Pods(ns).Get(ctx, podName, metav1.GetOptions{}); keep("Pod", err) {
			s.Pod = p
		}
	}
	events := func(what string, uid types.UID) []eventsv1.Event {
		list, err := c.Events.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.uid=" + string(uid)})
		if !keep(what, err) {
			return nil
		}
		diagnose.SortEvents(list.Items)
		return list.Items
	}
	s.TaskEvents = events("Events of the task", task.UID)
	if s.Pod != nil {
		s.PodEvents = events("Events of the pod", s.Pod.UID)
	}
	return s, nil
}

// duplicates lists the Sandboxes a warm task's claim controls other than
// the one the task runs on; keep records a failed read.
func duplicates(ctx context.Context, c *cli.Clients, task *calibanv1alpha1.CalibanTask, keep func(string, error) bool) []sandboxv1beta1.Sandbox {
	// Until the task names the Sandbox it runs on, any of the claim's may
	// be the one agent-sandbox settles on: none is a duplicate yet, as the
	// operator sees it (builders.DuplicateSandboxes).
	named := diagnose.SandboxName(task)
	if !builders.IsWarm(task) || task.Status.Launch.Claim == nil || task.Status.Launch.Claim.UID == "" || named == "" {
		return nil
	}
	uid := task.Status.Launch.Claim.UID
	// The generated client has only the operator's verbs; a list is read
	// through its REST client.
	list := &sandboxv1beta1.SandboxList{}
	err := c.Agents.RESTClient().Get().Namespace(task.Namespace).Resource(builders.SandboxResource).
		Param("labelSelector", builders.LabelClaimUID+"="+string(uid)).Do(ctx).Into(list)
	if !keep("Sandboxes of the claim", err) {
		return nil
	}
	var dups []sandboxv1beta1.Sandbox
	for _, sb := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&sb); ref != nil && ref.UID == uid && sb.Name != named {
			dups = append(dups, sb)
		}
	}
	return dups
}

// serviceAccountOf is the ServiceAccount the task's pod runs as: its own,
// or its warm pool's.
func serviceAccountOf(task *calibanv1alpha1.CalibanTask) string {
	if builders.IsWarm(task) {
		return builders.WarmPoolName(task.Spec.WorkspaceRef.Name)
	}
	return builders.ServiceAccountName(task.Name)
}
