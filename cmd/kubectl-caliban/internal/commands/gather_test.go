// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/caliban-ai/caliban-operator/cmd/kubectl-caliban/internal/cli"
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanfake "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/fake"
)

// found is what a Snapshot holds, by name: what the printers' golden files
// cannot show, which object gather read for which.
type found struct {
	Workspace, Sandbox, ServiceAccount, NetworkPolicy, Pod string
	// TaskEvents and PodEvents are the Events' reasons.
	TaskEvents, PodEvents []string
	Problems              []string
}

func foundIn(s *Snapshot) found {
	var f found
	if s.Workspace != nil {
		f.Workspace = s.Workspace.Name
	}
	if s.Sandbox != nil {
		f.Sandbox = s.Sandbox.Name
	}
	if s.ServiceAccount != nil {
		f.ServiceAccount = s.ServiceAccount.Name
	}
	if s.NetworkPolicy != nil {
		f.NetworkPolicy = s.NetworkPolicy.Name
	}
	if s.Pod != nil {
		f.Pod = s.Pod.Name
	}
	for _, e := range s.TaskEvents {
		f.TaskEvents = append(f.TaskEvents, e.Reason)
	}
	for _, e := range s.PodEvents {
		f.PodEvents = append(f.PodEvents, e.Reason)
	}
	f.Problems = s.Problems
	return f
}

// fakeClients serves objects the way the apiserver does for what gather
// asks, where the fakes fall short: they ignore field selectors, so Events
// are selected here by the object they regard. Reads of the resource
// refused are forbidden, as RBAC refuses them.
func fakeClients(refused string, objects ...runtime.Object) *cli.Clients {
	caliban, kube := calibanfake.NewClientset(), kubefake.NewClientset()
	var sandboxes []*sandboxv1beta1.Sandbox
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *calibanv1alpha1.CalibanTask, *calibanv1alpha1.Workspace:
			err = caliban.Tracker().Add(o)
		case *sandboxv1beta1.Sandbox:
			sandboxes = append(sandboxes, o)
		default:
			err = kube.Tracker().Add(o)
		}
		if err != nil {
			panic(err)
		}
	}
	// The fake's tracker cannot hold a Sandbox (its field manager has no
	// schema for the view), so Sandboxes are served from here.
	caliban.PrependReactor("get", builders.SandboxResource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		get := a.(k8stesting.GetAction)
		for _, sb := range sandboxes {
			if sb.Namespace == get.GetNamespace() && sb.Name == get.GetName() {
				return true, sb.DeepCopy(), nil
			}
		}
		return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), get.GetName())
	})
	kube.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := kube.Tracker().List(a.GetResource(), eventsv1.SchemeGroupVersion.WithKind("Event"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*eventsv1.EventList)
		selector := a.(k8stesting.ListAction).GetListRestrictions().Fields
		list.Items = slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool {
			return !selector.Matches(fields.Set{"regarding.uid": string(e.Regarding.UID)})
		})
		return true, list, nil
	})
	// The REST client refuses a read without a name before it sends it.
	kube.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "" {
			return true, nil, errors.New("resource name may not be empty")
		}
		return false, nil, nil
	})
	forbid := func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New(`User "bob" cannot read them`))
	}
	caliban.PrependReactor("*", refused, forbid)
	kube.PrependReactor("*", refused, forbid)
	return &cli.Clients{
		Caliban: caliban.CalibanV1alpha1(), Agents: caliban.AgentsV1beta1(),
		Core: kube.CoreV1(), Networking: kube.NetworkingV1(), Events: kube.EventsV1(),
	}
}

func TestGather(t *testing.T) {
	task := fxTask("fix-login", "team-a", running)
	sandbox := fxSandbox("fix-login", metav1.ConditionTrue, "DependenciesReady", "Pod is Ready; Service Exists")
	pod := fxPod("fix-login")
	event := func(name string, regarding types.UID, reason string) *eventsv1.Event {
		e := fxEvent(regarding, "Normal", reason, "", time.Minute)
		e.Name, e.Namespace = name, "team-a"
		return &e
	}
	everything := []runtime.Object{
		task, fxWorkspace("ws", calibanv1alpha1.WorkspaceReady, ""), sandbox, pod,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: builders.ServiceAccountName("fix-login"), Namespace: "team-a"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: builders.NetworkPolicyName("fix-login"), Namespace: "team-a"}},
		event("e1", task.UID, "PhaseChanged"), event("e2", pod.UID, "Scheduled"), event("e3", "uid-other", "Unrelated"),
	}
	warmTask := task.DeepCopy()
	warmTask.Status.SandboxRef = nil
	warmTask.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchWarm}
	adopted := sandbox.DeepCopy()
	adopted.Annotations = map[string]string{"agents.x-k8s.io/pod-name": "ws-warm-x7k2p"}
	adoptedPod := fxPod("fix-login")
	adoptedPod.Name = "ws-warm-x7k2p"

	tests := map[string]struct {
		objects []runtime.Object
		refused string
		want    found
	}{
		"a Running task: its Workspace, Sandbox, ServiceAccount, NetworkPolicy, pod, and the Events regarding it and its pod": {
			objects: everything,
			want: found{Workspace: "ws", Sandbox: "fix-login-sbx", ServiceAccount: builders.ServiceAccountName("fix-login"), NetworkPolicy: builders.NetworkPolicyName("fix-login"),
				Pod: "fix-login-sbx", TaskEvents: []string{"PhaseChanged"}, PodEvents: []string{"Scheduled"}},
		},
		"a Sandbox that adopted a pod of another name leads to that pod": {
			objects: []runtime.Object{task, adopted, adoptedPod},
			want:    found{Sandbox: "fix-login-sbx", Pod: "ws-warm-x7k2p"},
		},
		"objects not made yet are absent, not problems": {
			objects: []runtime.Object{task},
		},
		"a warm task whose claim holds no Sandbox yet has no pod to read, and no problem": {
			objects: []runtime.Object{warmTask},
		},
		"a refused read of Sandboxes is a problem, and the pod is still read by the Sandbox's name": {
			objects: everything,
			refused: "sandboxes",
			want: found{Workspace: "ws", ServiceAccount: builders.ServiceAccountName("fix-login"), NetworkPolicy: builders.NetworkPolicyName("fix-login"),
				Pod: "fix-login-sbx", TaskEvents: []string{"PhaseChanged"}, PodEvents: []string{"Scheduled"},
				Problems: []string{`Sandbox: sandboxes.agents.x-k8s.io is forbidden: User "bob" cannot read them`}},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := gather(context.Background(), fakeClients(test.refused, test.objects...), "team-a", "fix-login")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(test.want, foundIn(s)); diff != "" {
				t.Errorf("gathered (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGatherOfATaskThatDoesNotExistIsAUsageError(t *testing.T) {
	_, err := gather(context.Background(), fakeClients(""), "team-a", "nope")
	if code, _ := cli.ExitCode(err); code != cli.ExitUsage {
		t.Errorf("exit code %d for %v, want %d", code, err, cli.ExitUsage)
	}
}
