// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The identities of the admission tests. Both may write tasks and
// Workspaces in the test's namespace; only alice is in the group the
// component's default parameters name.
const (
	unattendedGroup = "caliban:unattended"
	alice           = "alice"
	bob             = "bob"
)

// TestTheAdmissionComponentGatesUnattendedWork installs manifests/admission
// as users do, exercises it with impersonated identities against the real
// API server's admission chain, and removes it again.
//
// Not parallel: the component's policies are cluster-wide. go test runs the
// package's parallel tests only after this one has finished, so it sees no
// other test's requests, and they never see the component.
func TestTheAdmissionComponentGatesUnattendedWork(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	startOperator(t, "admission", ns)
	createProviderSecret(t, ns)
	allowToWriteTasks(t, ns, rbacv1.Subject{Kind: rbacv1.UserKind, Name: alice}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: bob},
		rbacv1.Subject{Kind: rbacv1.UserKind, Name: "carol"}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prospero", Namespace: ns})
	// Both may read the provider key every test Workspace names, and the
	// router configuration bob names below, so that only
	// caliban-unattended speaks here (caliban-secret-refs has tests of its
	// own).
	allow(t, ns, "provider-key", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{providerSecret}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"bobs-router"}, Verbs: []string{"get"}},
	}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: alice}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: bob})
	asAlice := clientAs(t, alice, unattendedGroup)
	asBob := clientAs(t, bob)

	// alice's Workspace allows unattended work; bob's has no agent policy.
	createAs(t, asAlice, newWorkspace(ns, "trusting", allowUnattended))
	createAs(t, asBob, newWorkspace(ns, "plain"))
	waitForWorkspace(t, ns, "trusting", settleTimeout, workspaceReady)
	waitForWorkspace(t, ns, "plain", settleTimeout, workspaceReady)

	t.Run("without the component, anyone who may write tasks may ask for an unattended one", func(t *testing.T) {
		createAs(t, asBob, newTask(ns, "before", "trusting", unattended))
		got := waitForTask(t, ns, "before", settleTimeout, isRunning)
		if got.Status.PermissionPosture != calibanv1alpha1.PostureUnattended || got.Status.RequestedBy != "" {
			t.Errorf("posture %q, requestedBy %q; want unattended and nobody recorded", got.Status.PermissionPosture, got.Status.RequestedBy)
		}
	})

	component := installAdmission(t)
	waitForAdmission(t, ns, asAlice, asBob)

	t.Run("a member of caliban:unattended runs an unattended task, and status and the Event name her", func(t *testing.T) {
		created := createAs(t, asAlice, newTask(ns, "night-shift", "trusting", unattended))
		if got := created.GetAnnotations()[calibanv1alpha1.AnnotationRequestedBy]; got != alice {
			t.Errorf("the API server recorded %q as the creator, want %q", got, alice)
		}
		got := waitForTask(t, ns, "night-shift", settleTimeout, isRunning)
		if got.Status.PermissionPosture != calibanv1alpha1.PostureUnattended || got.Status.RequestedBy != alice {
			t.Errorf("posture %q, requestedBy %q; want unattended, %s", got.Status.PermissionPosture, got.Status.RequestedBy, alice)
		}
		waitForEvent(t, ns, "night-shift", corev1.EventTypeNormal, "UnattendedAdmitted", noteContains("'trusting'", "requested by 'alice'"))

		// docs/security.md's query: the unattended tasks, by field selector.
		list, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.permissionPosture=unattended"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tk := range list.Items {
			names = append(names, tk.Name+" by "+tk.Status.RequestedBy)
		}
		if diff := cmp.Diff([]string{"before by ", "night-shift by alice"}, names); diff != "" {
			t.Errorf("unattended tasks (-want +got):\n%s", diff)
		}
	})

	t.Run("a user outside it is refused an unattended task, with a message naming the field and the group", func(t *testing.T) {
		_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "bobs-night", "trusting", unattended), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, "spec.task.permissionPosture: unattended", "bob may not", "group caliban:unattended"); err != nil {
			t.Error(err)
		}
	})

	t.Run("a user outside it may run a supervised task, but not turn it unattended", func(t *testing.T) {
		createAs(t, asBob, newTask(ns, "day-shift", "trusting"))
		got := waitForTask(t, ns, "day-shift", settleTimeout, isRunning)
		if got.Status.PermissionPosture != calibanv1alpha1.PostureSupervised || got.Status.RequestedBy != bob {
			t.Errorf("posture %q, requestedBy %q; want supervised, %s", got.Status.PermissionPosture, got.Status.RequestedBy, bob)
		}
		_, err := framework.TryUpdateTask(ctx, asBob, ns, "day-shift", func(tk *calibanv1alpha1.CalibanTask) { unattended(&tk.Spec) })
		if err := framework.IsForbidden(err, "spec.task.permissionPosture: unattended", "bob may not"); err != nil {
			t.Error(err)
		}
	})

	t.Run("a user outside it may not change unattended work, but may suspend it", func(t *testing.T) {
		mayNotChange := []string{"bob may not change a task that runs unattended (spec.task.permissionPosture: unattended)",
			"only group caliban:unattended, group system:masters may (ConfigMap caliban-system/caliban-unattended)"}
		for what, tc := range map[string]struct {
			edit  func(*calibanv1alpha1.CalibanTaskSpec)
			field string
		}{
			"its agentType": {func(s *calibanv1alpha1.CalibanTaskSpec) { s.Task.AgentType = "reviewer" }, "spec.task: "},
			"its prompt":    {func(s *calibanv1alpha1.CalibanTaskSpec) { s.Task.Prompt = "Push to main." }, "spec.task: "},
			"its runtime class": {func(s *calibanv1alpha1.CalibanTaskSpec) {
				s.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "runc"}
			}, "spec.isolation: "},
			"its state endpoint": {func(s *calibanv1alpha1.CalibanTaskSpec) {
				s.State = &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://collector.example.com"}
			}, "spec.state: "},
			"its router config": {func(s *calibanv1alpha1.CalibanTaskSpec) {
				s.Model = &calibanv1alpha1.ModelSpec{RouterConfigRef: "bobs-router"}
			}, "spec.model: "},
			"its posture, to supervised": {func(s *calibanv1alpha1.CalibanTaskSpec) { s.Task.PermissionPosture = calibanv1alpha1.PostureSupervised }, "spec.task: "},
			"suspend, and its prompt": {func(s *calibanv1alpha1.CalibanTaskSpec) {
				s.Suspend, s.Task.Prompt = true, "Push to main."
			}, "spec.suspend, spec.task: "},
		} {
			_, err := framework.TryUpdateTask(ctx, asBob, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) { tc.edit(&tk.Spec) })
			if err := framework.IsForbidden(err, append([]string{tc.field}, mayNotChange...)...); err != nil {
				t.Errorf("bob changing %s: %v", what, err)
			}
		}
		// Metadata is not the agent's configuration.
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) { tk.Labels = map[string]string{"reviewed-by": bob} }); err != nil {
			t.Errorf("bob labelling an unattended task: %v", err)
		}
		// Stopping an agent is always safe; starting it again is not.
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.Suspend = true }); err != nil {
			t.Fatalf("bob suspending an unattended task: %v", err)
		}
		waitForTask(t, ns, "night-shift", settleTimeout, hasPhase(calibanv1alpha1.TaskSuspended))
		_, err := framework.TryUpdateTask(ctx, asBob, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.Suspend = false })
		if err := framework.IsForbidden(err, append([]string{"spec.suspend: "}, mayNotChange...)...); err != nil {
			t.Errorf("bob resuming an unattended task: %v", err)
		}
		if _, err := framework.TryUpdateTask(ctx, asAlice, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) {
			tk.Spec.Suspend, tk.Spec.Task.AgentType = false, "reviewer"
		}); err != nil {
			t.Errorf("alice resuming and editing her unattended task: %v", err)
		}
		waitForTask(t, ns, "night-shift", settleTimeout, isRunning)

		// A Workspace that allows unattended work, or only has an
		// unsupervised setting, is alice's to change too.
		createAs(t, asAlice, newWorkspace(ns, "loose", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.AgentPolicy = &calibanv1alpha1.AgentPolicy{PermissionMode: "dontAsk"}
		}))
		mayNotChangeWorkspace := "bob may not change a Workspace that lets agents run unattended or unsupervised (spec.agentPolicy)"
		for what, tc := range map[string]struct {
			ws    string
			edit  func(*calibanv1alpha1.WorkspaceSpec)
			field string
		}{
			"its display name": {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) { s.DisplayName = "Edited by bob" }, "spec.displayName: "},
			"its sources": {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) {
				s.Sources[0].Repo = "https://git.example.com/bob/fork.git"
			}, "spec.sources: "},
			"its egress": {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) {
				s.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "0.0.0.0/0"}}}
			}, "spec.egress: "},
			"its providers": {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) { s.Providers[0].BaseURL = "https://collector.example.com" }, "spec.providers: "},
			"its isolation": {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) {
				s.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "runc"}
			}, "spec.isolation: "},
			"its agent policy, to supervised":     {"trusting", func(s *calibanv1alpha1.WorkspaceSpec) { s.AgentPolicy = nil }, "spec.agentPolicy: "},
			"an unsupervised setting's Workspace": {"loose", func(s *calibanv1alpha1.WorkspaceSpec) { s.DisplayName = "Edited by bob" }, "spec.displayName: "},
		} {
			_, err := framework.TryUpdateWorkspace(ctx, asBob, ns, tc.ws, tc.edit)
			if err := framework.IsForbidden(err, tc.field+mayNotChangeWorkspace, "only group caliban:unattended"); err != nil {
				t.Errorf("bob changing %s: %v", what, err)
			}
		}
		if _, err := framework.TryUpdateWorkspace(ctx, asAlice, ns, "trusting", func(s *calibanv1alpha1.WorkspaceSpec) { s.DisplayName = "Edited by alice" }); err != nil {
			t.Errorf("alice editing her Workspace that allows unattended work: %v", err)
		}
	})

	t.Run("a user outside it is refused every setting that lets agents act unattended", func(t *testing.T) {
		tests := map[string]struct {
			policy calibanv1alpha1.AgentPolicy
			field  string
		}{
			"allowUnattended":        {policy: calibanv1alpha1.AgentPolicy{AllowUnattended: true}, field: "spec.agentPolicy.allowUnattended: true"},
			"permissionMode dontAsk": {policy: calibanv1alpha1.AgentPolicy{PermissionMode: "dontAsk"}, field: "spec.agentPolicy.permissionMode: dontAsk"},
			"permissionMode bypass":  {policy: calibanv1alpha1.AgentPolicy{PermissionMode: "bypassPermissions"}, field: "spec.agentPolicy.permissionMode: bypassPermissions"},
			"autoAllow":              {policy: calibanv1alpha1.AgentPolicy{AutoAllow: new(true)}, field: "spec.agentPolicy.autoAllow: true"},
			"noPermissions":          {policy: calibanv1alpha1.AgentPolicy{NoPermissions: new(true)}, field: "spec.agentPolicy.noPermissions: true"},
		}
		for name, tc := range tests {
			t.Run(name+" on create and on update", func(t *testing.T) {
				policy := tc.policy
				_, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "bobs-"+strings.ToLower(strings.ReplaceAll(name, " ", "-")), func(s *calibanv1alpha1.WorkspaceSpec) { s.AgentPolicy = &policy }), metav1.CreateOptions{})
				if err := framework.IsForbidden(err, tc.field, "bob may not", "group caliban:unattended"); err != nil {
					t.Errorf("create: %v", err)
				}
				_, err = framework.TryUpdateWorkspace(ctx, asBob, ns, "plain", func(s *calibanv1alpha1.WorkspaceSpec) { s.AgentPolicy = &policy })
				if err := framework.IsForbidden(err, tc.field, "bob may not"); err != nil {
					t.Errorf("update: %v", err)
				}
			})
		}
		// A supervised setting is nobody's privilege.
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "plain", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.AgentPolicy = &calibanv1alpha1.AgentPolicy{PermissionMode: "acceptEdits", NoMCP: new(true)}
		}); err != nil {
			t.Errorf("bob could not set supervised agent-policy settings: %v", err)
		}
	})

	t.Run("the record of who asked cannot be forged or rewritten", func(t *testing.T) {
		forged := newTask(ns, "forged", "plain")
		forged.Annotations = map[string]string{calibanv1alpha1.AnnotationRequestedBy: alice}
		_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, forged, metav1.CreateOptions{})
		if err := framework.IsForbidden(err, "metadata.annotations[caliban.caliban-ai.dev/requested-by]", "(bob)", "remove the annotation"); err != nil {
			t.Errorf("forging on create: %v", err)
		}
		for _, who := range []struct {
			name   string
			client calibanclient.Interface
		}{{bob, asBob}, {alice, asAlice}} {
			_, err := framework.TryUpdateTask(ctx, who.client, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) {
				tk.Annotations[calibanv1alpha1.AnnotationRequestedBy] = who.name + "-instead"
			})
			if err := framework.IsForbidden(err, "metadata.annotations[caliban.caliban-ai.dev/requested-by]", "(alice)", "cannot be changed"); err != nil {
				t.Errorf("%s rewriting the record: %v", who.name, err)
			}
		}
		// A replace that drops the record does not erase it.
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "night-shift", func(tk *calibanv1alpha1.CalibanTask) {
			delete(tk.Annotations, calibanv1alpha1.AnnotationRequestedBy)
		}); err != nil {
			t.Fatalf("an update without the record: %v", err)
		}
		got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "night-shift", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec := got.Annotations[calibanv1alpha1.AnnotationRequestedBy]; rec != alice {
			t.Errorf("after an update without it the record is %q, want %q", rec, alice)
		}
	})

	t.Run("the parameters name ServiceAccounts, and a namespace's own key replaces the cluster-wide one", func(t *testing.T) {
		setParameters(t, map[string]string{
			"groups":          unattendedGroup,
			"serviceAccounts": ns + ":prospero",
			ns + ".groups":    "team-leads",
		})
		asProspero := clientAs(t, "system:serviceaccount:"+ns+":prospero", "system:serviceaccounts", "system:serviceaccounts:"+ns)
		asCarol := clientAs(t, "carol", "team-leads")
		// The parameters reach the API server's cache within a moment.
		framework.Eventually(t, settleTimeout, func() error {
			_, err := asCarol.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "trusting", unattended),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
		createAs(t, asProspero, newTask(ns, "from-prospero", "trusting", unattended))
		got := waitForTask(t, ns, "from-prospero", settleTimeout, isRunning)
		if want := "system:serviceaccount:" + ns + ":prospero"; got.Status.RequestedBy != want {
			t.Errorf("requestedBy %q, want %q", got.Status.RequestedBy, want)
		}
		_, err := asAlice.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "alice-again", "trusting", unattended), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, "alice may not", "group team-leads", "ServiceAccount "+ns+":prospero"); err != nil {
			t.Errorf("alice, in the cluster-wide group only, in a namespace with its own groups: %v", err)
		}
	})

	removeAdmission(t, component)
	t.Run("removing the component restores the behaviour without it", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "after", "trusting", unattended), metav1.CreateOptions{})
			return err
		})
		got := waitForTask(t, ns, "after", settleTimeout, isRunning)
		if got.Status.PermissionPosture != calibanv1alpha1.PostureUnattended {
			t.Errorf("posture %q, want unattended", got.Status.PermissionPosture)
		}
	})
}

// installAdmission applies manifests/admission as
// `kubectl apply --server-side -k manifests/admission` would, and removes
// it when the test ends if the test has not.
func installAdmission(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	// The operator's manifests come first and create caliban-system, where
	// the parameters live. Only the namespace here: the operator's RBAC
	// left behind would widen what the install tests see it may do.
	base, err := framework.Kustomize(cluster.Root, filepath.Join("manifests", "base"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range base {
		if u.GetKind() == "Namespace" {
			if err := cluster.Apply(ctx, "", u); err != nil {
				t.Fatal(err)
			}
		}
	}
	objs, err := framework.Kustomize(cluster.Root, filepath.Join("manifests", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	// Also what was applied before a refusal must go.
	t.Cleanup(func() { removeAdmission(t, objs) })
	if err := cluster.Apply(ctx, "", objs...); err != nil {
		t.Fatal(err)
	}
	return objs
}

// waitForAdmission waits until the component is in force in every part
// the tests rely on: the API server loads new policies, their parameters
// and the custom kinds they name into its caches within moments, answering
// meanwhile with allowances or "kind not found" refusals. Dry runs change
// nothing.
func waitForAdmission(t *testing.T, ns string, asAlice, asBob calibanclient.Interface) {
	t.Helper()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, settleTimeout, func() error {
		_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "trusting", unattended), dryRun)
		if err := framework.IsForbidden(err, "bob may not ask for an agent that runs unattended"); err != nil {
			return fmt.Errorf("bob's unattended task: %w", err)
		}
		_, err = asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "probe", allowUnattended), dryRun)
		if err := framework.IsForbidden(err, "bob may not ask for an agent that runs unattended"); err != nil {
			return fmt.Errorf("bob's unattended Workspace: %w", err)
		}
		tk, err := asAlice.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "trusting", unattended), dryRun)
		if err != nil {
			return fmt.Errorf("alice's unattended task: %w", err)
		}
		if got := tk.Annotations[calibanv1alpha1.AnnotationRequestedBy]; got != alice {
			return fmt.Errorf("alice's task is recorded as requested by %q", got)
		}
		return nil
	})
}

// removeAdmission deletes the component as `kubectl delete -k` would, and
// waits until the API server has let go of caliban-unattended and
// caliban-requested-by: until its caches follow, a binding whose
// parameters are gone refuses every task and Workspace, also the next
// test's. Dry runs change nothing.
func removeAdmission(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if err := cluster.Remove(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	ns, dryRun := framework.OperatorNamespace, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, settleTimeout, func() error {
		if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "probe", allowUnattended), dryRun); err != nil {
			return fmt.Errorf("a Workspace after the component was removed: %w", err)
		}
		tk, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "probe", unattended), dryRun)
		if err != nil {
			return fmt.Errorf("a task after the component was removed: %w", err)
		}
		if rec, ok := tk.Annotations[calibanv1alpha1.AnnotationRequestedBy]; ok {
			return fmt.Errorf("the API server still records who created a task (%q)", rec)
		}
		return nil
	})
}

// waitInForce waits until probe says a policy of the component is in
// force. It does not stop the test when it never is: the refusals expected
// below then fail one by one, each saying what went through.
func waitInForce(t *testing.T, what string, probe func() error) {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		err := probe()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s is not in force after %s: %v", what, settleTimeout, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setParameters replaces the data of the component's parameters.
func setParameters(t *testing.T, data map[string]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cluster.Kube.CoreV1().ConfigMaps(framework.OperatorNamespace).Get(ctx, "caliban-unattended", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data = data
		_, err = cluster.Kube.CoreV1().ConfigMaps(framework.OperatorNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting the admission parameters: %v", err)
	}
}

// allowToWriteTasks lets subjects write tasks and Workspaces in ns, the
// access the component is meant to refine.
func allowToWriteTasks(t *testing.T, ns string, subjects ...rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "task-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{calibanv1alpha1.SchemeGroupVersion.Group},
			Resources: []string{"calibantasks", "workspaces"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	if _, err := cluster.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "task-writers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subjects,
	}
	if _, err := cluster.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clientAs is a caliban client that the API server authenticates as user,
// a member of groups (and system:authenticated).
func clientAs(t *testing.T, user string, groups ...string) calibanclient.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := calibanclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
