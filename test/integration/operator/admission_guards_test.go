// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The operator's identity as manifests/admission names it.
const operatorUser = "system:serviceaccount:" + framework.OperatorNamespace + ":" + framework.OperatorServiceAccount

// TestTheAdmissionComponentGuardsWhatTheOperatorTrustsInStatus: with the
// component, only the operator writes the status fields it acts on (the
// pin, the phase, Ready, the record of who asked), also against prospero's
// ServiceAccount and a namespace role over every resource of the group,
// which may still write their own conditions. The operator runs as its own ServiceAccount,
// the identity the policy lets through, and takes tasks to Running and
// Completed with the component in force.
//
// Not parallel, as TestTheAdmissionComponentGatesUnattendedWork.
func TestTheAdmissionComponentGuardsWhatTheOperatorTrustsInStatus(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	runOperatorAsItsServiceAccount(t, "status-guard", ns)
	createProviderSecret(t, ns)
	prospero := "system:serviceaccount:" + ns + ":prospero"
	// prospero's own installation grants this (docs/deploying.md#rbac).
	allow(t, ns, "prospero", []rbacv1.PolicyRule{
		{APIGroups: []string{calibanv1alpha1.GroupName}, Resources: []string{"calibantasks"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{calibanv1alpha1.GroupName}, Resources: []string{"calibantasks/status"}, Verbs: []string{"patch"}},
	}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prospero", Namespace: ns})
	// A namespace role as broad as they come: every resource of the group,
	// the status subresources included.
	allow(t, ns, "caliban-admin", []rbacv1.PolicyRule{{
		APIGroups: []string{calibanv1alpha1.GroupName}, Resources: []string{"*"}, Verbs: []string{"*"},
	}}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: bob})
	asProspero := clientAs(t, prospero, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	asBob := clientAs(t, bob)

	createReadyWorkspace(t, ns, "ws")
	createTask(t, ns, "before", "ws")
	waitForTask(t, ns, "before", settleTimeout, isRunning)

	// The pin prospero's ServiceAccount would like: an unattended Workspace
	// with no egress and a provider Secret and host of its choice.
	forgedPin := map[string]any{
		"provider": map[string]any{"name": "planner", "kind": "anthropic", "baseUrl": "https://collector.example.com",
			"credentialsRef": map[string]any{"secretName": "someone-elses-key", "key": "api-key"}},
		"agentPolicy": map[string]any{"allowUnattended": true, "autoAllow": true},
	}
	// So that a refusal below is the component's, not the test's RBAC. A
	// component an earlier test removed may linger for a moment.
	t.Run("without the component, prospero's ServiceAccount may write the pin", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			return applyStatusAs(asProspero, "CalibanTask", ns, "before", map[string]any{"resolvedWorkspace": forgedPin}, true, metav1.DryRunAll)
		})
	})

	component := installAdmission(t)
	t.Run("the API server finds nothing to warn about in the component's CEL", func(t *testing.T) {
		checkTypeChecking(t)
	})
	waitInForce(t, "caliban-status", func() error {
		err := applyStatusAs(asProspero, "CalibanTask", ns, "before", map[string]any{"phase": "Completed"}, true, metav1.DryRunAll)
		return framework.IsForbidden(err, "status.phase: written only by the operator")
	})
	// The API server loads each policy on its own: the one that records
	// who created a task may come later than the status guard.
	waitInForce(t, "caliban-requested-by", func() error {
		tk, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "ws"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if got := tk.Annotations[calibanv1alpha1.AnnotationRequestedBy]; got != bob {
			return fmt.Errorf("a task bob creates is recorded as requested by %q", got)
		}
		return nil
	})

	t.Run("the operator's own ServiceAccount writes status with the component in force", func(t *testing.T) {
		created := createTask(t, ns, "task", "ws")
		got := waitForTask(t, ns, "task", settleTimeout, isRunning)
		if want := created.Annotations[calibanv1alpha1.AnnotationRequestedBy]; want == "" || got.Status.RequestedBy != want {
			t.Errorf("status.requestedBy %q, want the recorded creator %q", got.Status.RequestedBy, want)
		}
	})

	writers := []struct {
		name   string
		client calibanclient.Interface
	}{{prospero, asProspero}, {bob, asBob}}

	t.Run("prospero's ServiceAccount and a role over the whole group may not write what the operator owns", func(t *testing.T) {
		ready := map[string]any{"type": builders.ConditionReady, "status": "True", "reason": builders.ReasonRunning,
			"message": "all is well", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		for _, w := range writers {
			for what, write := range map[string]struct {
				field string
				do    func() error
			}{
				"a pin of its own": {"status.resolvedWorkspace", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"resolvedWorkspace": forgedPin}, true)
				}},
				"another requester": {"status.requestedBy", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"requestedBy": "somebody-else"}, true)
				}},
				"no requester": {"status.requestedBy", func() error {
					return mergePatchStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"requestedBy": nil})
				}},
				"another phase": {"status.phase", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"phase": "Completed"}, true)
				}},
				"another Ready": {"status.conditions[Ready]", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"conditions": []any{ready}}, true)
				}},
				"another pin signature": {"status.pinSignature", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"pinSignature": "v1:forged"}, true)
				}},
				"another endpoint": {"status.calibandEndpoint", func() error {
					return mergePatchStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"calibandEndpoint": "caliband.elsewhere.svc:8443"})
				}},
				// A cold task flipped to Warm would get a claim, and its
				// NetworkPolicy would select the claim's pod, not its own.
				"another launch": {"status.launch", func() error {
					return applyStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"launch": map[string]any{"type": "Warm"}}, true)
				}},
				"another claim": {"status.launch", func() error {
					return mergePatchStatusAs(w.client, "CalibanTask", ns, "task", map[string]any{"launch": map[string]any{
						"claim": map[string]any{"name": "task-claim", "uid": "0b9c2d7e-5f41-4a8e-9d3c-6e2f1a7b8c90"}}})
				}},
			} {
				err := write.do()
				if err := framework.IsForbidden(err, write.field+": written only by the operator ("+operatorUser+")",
					w.name+" may write only its own conditions"); err != nil {
					t.Errorf("%s writing %s: %v", w.name, what, err)
				}
			}
		}
		got, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Get(ctx, "task", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := isRunning(got); err != nil || got.Status.ResolvedWorkspace.Provider.BaseURL != "" || got.Status.RequestedBy == "" ||
			got.Status.Launch == nil || got.Status.Launch.Type != calibanv1alpha1.LaunchCold || got.Status.Launch.Claim != nil {
			t.Errorf("after the refused writes the task is %v, baseUrl %q, requestedBy %q, launch %+v", err,
				got.Status.ResolvedWorkspace.Provider.BaseURL, got.Status.RequestedBy, got.Status.Launch)
		}
	})

	t.Run("prospero's ServiceAccount still writes its own conditions, and the operator acts on them", func(t *testing.T) {
		settled := map[string]any{"type": builders.ConditionAgentsSettled, "status": "True", "reason": "Succeeded",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		if err := applyStatusAs(asProspero, "CalibanTask", ns, "task", map[string]any{"conditions": []any{settled}}, false); err != nil {
			t.Fatalf("prospero's AgentsSettled: %v", err)
		}
		waitForTask(t, ns, "task", settleTimeout, hasPhase(calibanv1alpha1.TaskCompleted))
	})

	// prospero has no business there, and no RBAC for it.
	t.Run("nobody but the operator writes a Workspace's status", func(t *testing.T) {
		err := mergePatchStatusAs(asBob, "Workspace", ns, "ws", map[string]any{"phase": "Failed", "message": "forged"})
		if err := framework.IsForbidden(err, "status.message, status.phase: written only by the operator ("+operatorUser+")",
			"bob may not write a Workspace status"); err != nil {
			t.Errorf("bob writing the phase: %v", err)
		}
		err = applyStatusAs(asBob, "Workspace", ns, "ws", map[string]any{"conditions": []any{map[string]any{
			"type": "Reviewed", "status": "True", "reason": "Forged", "message": "forged", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}, false)
		if err := framework.IsForbidden(err, "status.conditions: written only by the operator"); err != nil {
			t.Errorf("bob adding a condition: %v", err)
		}
		waitForWorkspace(t, ns, "ws", settleTimeout, workspaceReady)
	})

	t.Run("system:masters may, as everywhere", func(t *testing.T) {
		if err := mergePatchStatusAs(cluster.Caliban, "CalibanTask", ns, "before", map[string]any{"checkpointRef": "by-an-admin"},
			metav1.DryRunAll); err != nil {
			t.Errorf("a member of system:masters: %v", err)
		}
	})

	removeAdmission(t, component)
}

// TestTheAdmissionComponentLetsOnlyThoseWhoMayReadASecretNameIt: with the
// component, a task or Workspace may name a Secret (a provider's key, a
// source's credentials, the state token) only if its writer may get that
// Secret, when the reference is new or is sent somewhere new. Edits that
// leave references as they were need no Secret access.
//
// Not parallel, as TestTheAdmissionComponentGatesUnattendedWork.
func TestTheAdmissionComponentLetsOnlyThoseWhoMayReadASecretNameIt(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	startOperator(t, "secret-refs", ns)
	createProviderSecret(t, ns)
	createSecret(t, ns, "team-key", map[string]string{providerKey: "sk-team"})
	createSecret(t, ns, "gonzalo-token", map[string]string{"token": "gonzalo-secret"})
	createTypedSecret(t, ns, "git-creds", corev1.SecretTypeBasicAuth,
		map[string]string{corev1.BasicAuthUsernameKey: "bot", corev1.BasicAuthPasswordKey: "ghp-team"})
	many := make([]string, 9)
	for i := range many {
		many[i] = "key-" + strconv.Itoa(i+1)
		createSecret(t, ns, many[i], map[string]string{providerKey: "sk-" + many[i]})
	}
	const dana = "dana"
	user := func(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }
	allowToWriteTasks(t, ns, user(alice), user(bob), user(dana))
	getSecrets := func(names ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get"}}}
	}
	// Everyone may use the shared provider key; only alice the team's
	// Secrets; bob the nine numbered ones by name; dana every Secret.
	allow(t, ns, "shared-key", getSecrets(providerSecret), user(alice), user(bob))
	allow(t, ns, "team-secrets", getSecrets("team-key", "gonzalo-token", "git-creds"), user(alice))
	allow(t, ns, "numbered-keys", getSecrets(many...), user(bob))
	allow(t, ns, "every-secret", getSecrets(), user(dana))
	asAlice, asBob, asDana := clientAs(t, alice), clientAs(t, bob), clientAs(t, dana)

	withProvider := func(name, secret string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(s *calibanv1alpha1.WorkspaceSpec) {
			s.Providers = append(s.Providers, calibanv1alpha1.Provider{Name: name, Kind: "openai",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: secret, Key: providerKey}})
		}
	}
	withGitSource := func(s *calibanv1alpha1.WorkspaceSpec) {
		s.Sources = append(s.Sources, calibanv1alpha1.Source{Name: "private", Repo: "https://git.example.com/team/app.git",
			Path: "/work/app", CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}})
	}
	remoteState := func(spec *calibanv1alpha1.CalibanTaskSpec) {
		spec.State = &calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://gonzalod.storage.svc:8080",
			TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo-token", Key: "token"}}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	// So that a refusal below is the component's, not the test's RBAC. A
	// component an earlier test removed may linger for a moment.
	t.Run("without the component, bob may name a Secret he may not read", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			_, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "probe", withProvider("team", "team-key")), dryRun)
			return err
		})
	})

	component := installAdmission(t)
	waitInForce(t, "caliban-secret-refs", func() error {
		_, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "probe", withProvider("team", "team-key")), dryRun)
		return framework.IsForbidden(err, "may not get Secret")
	})
	notName := func(field, secret string) []string {
		return []string{field + ": bob may not get Secret '" + secret + "' in namespace '" + ns + "', so may not name it"}
	}

	t.Run("bob may not name a Secret he may not get, in a Workspace or a task", func(t *testing.T) {
		_, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "bobs-provider", withProvider("team", "team-key")), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, notName("spec.providers[1].credentialsRef", "team-key")...); err != nil {
			t.Errorf("a provider's key: %v", err)
		}
		_, err = asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "bobs-source", withGitSource), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, notName("spec.sources[1].credentialsRef", "git-creds")...); err != nil {
			t.Errorf("a source's credentials: %v", err)
		}
		_, err = asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "bobs", "shared", remoteState), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, notName("spec.state.tokenRef", "gonzalo-token")...); err != nil {
			t.Errorf("a state token: %v", err)
		}
	})

	t.Run("alice, who may get them, may name them", func(t *testing.T) {
		createAs(t, asAlice, newWorkspace(ns, "shared", withProvider("team", "team-key"), withGitSource))
		createAs(t, asAlice, newTask(ns, "remote", "shared", remoteState))
		waitForWorkspace(t, ns, "shared", settleTimeout, workspaceReady)
	})

	t.Run("bob may edit what names no new Secret and sends none elsewhere", func(t *testing.T) {
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "shared", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.DisplayName = "Edited by bob"
			s.Env = append(s.Env, calibanv1alpha1.EnvVar{Name: "CALIBAN_EDITOR", Value: "bob"})
			s.Providers[1].Model = "gpt-5"
			s.Sources[1].Ref = "release"
		}); err != nil {
			t.Errorf("bob's edit of the Workspace: %v", err)
		}
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "remote", func(tk *calibanv1alpha1.CalibanTask) {
			tk.Spec.Task.Prompt = "Summarise the repository layout, briefly."
		}); err != nil {
			t.Errorf("bob's edit of the task: %v", err)
		}
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "shared", withProvider("shared-too", providerSecret)); err != nil {
			t.Errorf("bob adding a provider with a key he may get: %v", err)
		}
	})

	t.Run("bob may not send a Secret he may not get somewhere else", func(t *testing.T) {
		for what, tc := range map[string]struct {
			edit          func(*calibanv1alpha1.WorkspaceSpec)
			field, secret string
		}{
			"a provider's baseUrl": {func(s *calibanv1alpha1.WorkspaceSpec) { s.Providers[1].BaseURL = "https://collector.example.com" },
				"spec.providers[1].credentialsRef", "team-key"},
			"a provider's kind":     {func(s *calibanv1alpha1.WorkspaceSpec) { s.Providers[1].Kind = "collector" }, "spec.providers[1].credentialsRef", "team-key"},
			"a renamed provider":    {func(s *calibanv1alpha1.WorkspaceSpec) { s.Providers[1].Name = "renamed" }, "spec.providers[1].credentialsRef", "team-key"},
			"a provider of his own": {withProvider("mine", "team-key"), "spec.providers[3].credentialsRef", "team-key"},
			"a source's repo": {func(s *calibanv1alpha1.WorkspaceSpec) { s.Sources[1].Repo = "https://collector.example.com/x.git" },
				"spec.sources[1].credentialsRef", "git-creds"},
		} {
			_, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "shared", tc.edit)
			if err := framework.IsForbidden(err, notName(tc.field, tc.secret)...); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		_, err := framework.TryUpdateTask(ctx, asBob, ns, "remote", func(tk *calibanv1alpha1.CalibanTask) {
			tk.Spec.State.GonzaloEndpoint = "http://collector.example.com"
		})
		if err := framework.IsForbidden(err, notName("spec.state.tokenRef", "gonzalo-token")...); err != nil {
			t.Errorf("the state endpoint: %v", err)
		}
		// alice may.
		if _, err := framework.TryUpdateWorkspace(ctx, asAlice, ns, "shared", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.Providers[1].BaseURL = "https://llm-gateway.example.com"
		}); err != nil {
			t.Errorf("alice re-pointing her provider: %v", err)
		}
	})

	// Each Workspace below also names the shared provider key.
	t.Run("one request may name at most eight new Secrets, unless its writer may get every Secret", func(t *testing.T) {
		spec := func(n int) func(*calibanv1alpha1.WorkspaceSpec) {
			return func(s *calibanv1alpha1.WorkspaceSpec) {
				for _, name := range many[:n] {
					withProvider(name, name)(s)
				}
			}
		}
		if _, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "eight", spec(7)), dryRun); err != nil {
			t.Errorf("eight Secrets bob may get: %v", err)
		}
		_, err := asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "nine", spec(8)), dryRun)
		if err := framework.IsForbidden(err, "spec: names 9 Secrets not named before", "checks at most 8 in one request for bob",
			"who may not get every Secret in namespace '"+ns+"'"); err != nil {
			t.Errorf("nine Secrets: %v", err)
		}
		if _, err := asDana.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "ten", spec(9)), dryRun); err != nil {
			t.Errorf("ten Secrets by dana, who may get every Secret: %v", err)
		}
		// The eighth check is made: bob cannot hide a Secret he may not get
		// behind seven he may.
		_, err = asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "hidden", spec(6), withProvider("team", "team-key")), dryRun)
		if err := framework.IsForbidden(err, notName("spec.providers[7].credentialsRef", "team-key")...); err != nil {
			t.Errorf("the eighth of eight: %v", err)
		}
	})

	t.Run("the check stays within the API server's CEL budget on a large Workspace", func(t *testing.T) {
		large := func(s *calibanv1alpha1.WorkspaceSpec) {
			for i := range 200 {
				s.Providers = append(s.Providers, calibanv1alpha1.Provider{Name: fmt.Sprintf("p%d", i), Kind: "openai",
					CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey}})
				s.Sources = append(s.Sources, calibanv1alpha1.Source{Name: fmt.Sprintf("s%d", i), Repo: fmt.Sprintf("https://git.example.com/r%d.git", i),
					Path: fmt.Sprintf("/work/r%d", i), CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-creds"}})
			}
		}
		createAs(t, asAlice, newWorkspace(ns, "large", large))
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "large", func(s *calibanv1alpha1.WorkspaceSpec) { s.Providers[200].BaseURL = "https://llm.example.com" }); err != nil {
			t.Errorf("bob re-pointing the shared key in a large Workspace: %v", err)
		}
		_, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "large", func(s *calibanv1alpha1.WorkspaceSpec) { s.Sources[200].Repo = "https://collector.example.com/x.git" })
		if err := framework.IsForbidden(err, notName("spec.sources[200].credentialsRef", "git-creds")...); err != nil {
			t.Errorf("bob re-pointing a source in a large Workspace: %v", err)
		}
	})

	removeAdmission(t, component)
}

// runOperatorAsItsServiceAccount installs the operator's ServiceAccount and
// RBAC from manifests/base and starts the operator for ns with a token of
// that ServiceAccount alone, as in its pod. The RBAC goes when the test
// ends: the install tests must not find it left behind.
func runOperatorAsItsServiceAccount(t *testing.T, name, ns string) *framework.Operator {
	t.Helper()
	var namespace, identity []*unstructured.Unstructured
	for _, u := range kustomize(t, "manifests/base") {
		switch u.GetKind() {
		case "Namespace":
			namespace = append(namespace, u)
		case "Deployment":
		default:
			identity = append(identity, u)
		}
	}
	if err := cluster.Apply(ctx, "", append(namespace, identity...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Remove(ctx, identity...); err != nil {
			t.Errorf("removing the operator's identity: %v", err)
		}
	})
	// Its namespace, where its Role lets it keep the pin key, as in its pod.
	return startOperator(t, name, ns, "KUBECONFIG="+operatorKubeconfig(t), "CALIBAN_LEASE_NAMESPACE="+framework.OperatorNamespace)
}

// allow binds a Role of rules in ns to subjects.
func allow(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, subjects ...rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := cluster.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subjects,
	}
	if _, err := cluster.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// applyStatusAs server-side-applies status to a task's or Workspace's
// status subresource through client, as field manager prospero; force
// takes fields from their owner, as an attacker would.
func applyStatusAs(client calibanclient.Interface, kind, ns, name string, status map[string]any, force bool, dryRun ...string) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"status":     status,
	})
	if err != nil {
		return err
	}
	return patchStatus(client, kind, ns, name, types.ApplyYAMLPatchType, body,
		metav1.PatchOptions{FieldManager: framework.ProsperoManager, Force: &force, DryRun: dryRun})
}

// mergePatchStatusAs merge-patches a task's or Workspace's status through
// client; a nil value removes the field.
func mergePatchStatusAs(client calibanclient.Interface, kind, ns, name string, status map[string]any, dryRun ...string) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return patchStatus(client, kind, ns, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: framework.FieldManager, DryRun: dryRun})
}

func patchStatus(client calibanclient.Interface, kind, ns, name string, pt types.PatchType, body []byte, opts metav1.PatchOptions) error {
	var err error
	switch kind {
	case "CalibanTask":
		_, err = client.CalibanV1alpha1().CalibanTasks(ns).Patch(ctx, name, pt, body, opts, "status")
	case "Workspace":
		_, err = client.CalibanV1alpha1().Workspaces(ns).Patch(ctx, name, pt, body, opts, "status")
	default:
		err = fmt.Errorf("no status of kind %s", kind)
	}
	return err
}

// checkTypeChecking waits until the API server has type-checked each of
// the component's ValidatingAdmissionPolicies against the CRDs' schemas,
// and fails for every warning: a rule that does not compile as its author
// meant lets everything through.
func checkTypeChecking(t *testing.T) {
	t.Helper()
	for _, name := range []string{"caliban-unattended", "caliban-requested-by", "caliban-status", "caliban-secret-refs", "caliban-pod-labels"} {
		framework.Eventually(t, settleTimeout, func() error {
			p, err := cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return fmt.Errorf("ValidatingAdmissionPolicy %s is not type-checked yet", name)
			}
			for _, w := range p.Status.TypeChecking.ExpressionWarnings {
				t.Errorf("ValidatingAdmissionPolicy %s: %s: %s", name, w.FieldRef, w.Warning)
			}
			return nil
		})
	}
}
