// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// TestTheAdmissionComponentLetsOnlyThoseWhoMayReadTheKeysRePointThem: a
// Workspace env entry that decides where requests go or whom TLS trusts
// (a proxy in any case, a CA bundle, a provider SDK's endpoint) sends
// every provider key of the Workspace through it, as a provider's baseUrl
// sends one. With the component, adding or changing such an entry needs
// get on each of the Workspace's provider Secrets; unchanged entries,
// ordinary variables and removals need none.
//
// Not parallel, as TestTheAdmissionComponentGatesUnattendedWork.
func TestTheAdmissionComponentLetsOnlyThoseWhoMayReadTheKeysRePointThem(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	createProviderSecret(t, ns)
	createSecret(t, ns, "team-key", map[string]string{providerKey: "sk-team"})
	user := func(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }
	allowToWriteTasks(t, ns, user(alice), user(bob))
	getSecrets := func(names ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get"}}}
	}
	// Both may use the shared key; only alice the team's.
	allow(t, ns, "shared-key", getSecrets(providerSecret), user(alice), user(bob))
	allow(t, ns, "team-key", getSecrets("team-key"), user(alice))
	asAlice, asBob := clientAs(t, alice), clientAs(t, bob)

	withTeamProvider := func(s *calibanv1alpha1.WorkspaceSpec) {
		s.Providers = append(s.Providers, calibanv1alpha1.Provider{Name: "team", Kind: "openai",
			CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "team-key", Key: providerKey}})
	}
	withEnv := func(env ...calibanv1alpha1.EnvVar) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(s *calibanv1alpha1.WorkspaceSpec) { s.Env = append(s.Env, env...) }
	}
	proxy := calibanv1alpha1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.corp.example:3128"}
	createAs(t, asAlice, newWorkspace(ns, "shared", withTeamProvider))
	createAs(t, asAlice, newWorkspace(ns, "proxied", withTeamProvider, withEnv(proxy)))

	// Before the component, RBAC alone decides, and bob may re-point the
	// team's key he may not read: what the component is for. The entry is
	// taken out again, by alice.
	t.Run("without the component, bob may re-point a key he may not read", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			_, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "shared", withEnv(calibanv1alpha1.EnvVar{Name: "HTTPS_PROXY", Value: "http://collector.example.com:3128"}))
			return err
		})
		framework.UpdateWorkspace(t, asAlice, ns, "shared", func(s *calibanv1alpha1.WorkspaceSpec) { s.Env = workspaceSpec().Env })
	})

	component := installAdmission(t)
	waitInForce(t, "caliban-secret-refs on env", func() error {
		return framework.IsForbidden(dryRunUpdateWorkspace(asBob, ns, "shared", withEnv(proxy)), "may not get Secret")
	})
	notSet := func(field, name string) []string {
		return []string{field + ": bob may not get Secret 'team-key' in namespace '" + ns + "', so may not set " + name +
			", which decides where the Workspace sends its provider keys"}
	}

	t.Run("bob may not add or change an entry that re-points the keys", func(t *testing.T) {
		for what, tc := range map[string]struct {
			edit        func(*calibanv1alpha1.WorkspaceSpec)
			field, name string
		}{
			"a proxy":                       {withEnv(proxy), "spec.env[1]", "HTTPS_PROXY"},
			"a proxy in lower case":         {withEnv(calibanv1alpha1.EnvVar{Name: "https_proxy", Value: "http://p:3128"}), "spec.env[1]", "https_proxy"},
			"a proxy in mixed case":         {withEnv(calibanv1alpha1.EnvVar{Name: "Https_Proxy", Value: "http://p:3128"}), "spec.env[1]", "Https_Proxy"},
			"every proxy":                   {withEnv(calibanv1alpha1.EnvVar{Name: "ALL_PROXY", Value: "socks5://p:1080"}), "spec.env[1]", "ALL_PROXY"},
			"an exception from the proxy":   {withEnv(calibanv1alpha1.EnvVar{Name: "NO_PROXY", Value: "api.anthropic.com"}), "spec.env[1]", "NO_PROXY"},
			"node's CA bundle":              {withEnv(calibanv1alpha1.EnvVar{Name: "NODE_EXTRA_CA_CERTS", Value: "/work/caliban/ca.pem"}), "spec.env[1]", "NODE_EXTRA_CA_CERTS"},
			"OpenSSL's CA file":             {withEnv(calibanv1alpha1.EnvVar{Name: "SSL_CERT_FILE", Value: "/work/caliban/ca.pem"}), "spec.env[1]", "SSL_CERT_FILE"},
			"python's CA bundle":            {withEnv(calibanv1alpha1.EnvVar{Name: "REQUESTS_CA_BUNDLE", Value: "/work/caliban/ca.pem"}), "spec.env[1]", "REQUESTS_CA_BUNDLE"},
			"node's TLS check turned off":   {withEnv(calibanv1alpha1.EnvVar{Name: "NODE_TLS_REJECT_UNAUTHORIZED", Value: "0"}), "spec.env[1]", "NODE_TLS_REJECT_UNAUTHORIZED"},
			"an SDK's endpoint spelling":    {withEnv(calibanv1alpha1.EnvVar{Name: "OPENAI_API_BASE", Value: "https://collector.example.com"}), "spec.env[1]", "OPENAI_API_BASE"},
			"another kind's base URL":       {withEnv(calibanv1alpha1.EnvVar{Name: "GEMINI_BASE_URL", Value: "https://collector.example.com"}), "spec.env[1]", "GEMINI_BASE_URL"},
			"caliban's Azure resource":      {withEnv(calibanv1alpha1.EnvVar{Name: "AZURE_OPENAI_RESOURCE", Value: "collector"}), "spec.env[1]", "AZURE_OPENAI_RESOURCE"},
			"the name resolver's domain":    {withEnv(calibanv1alpha1.EnvVar{Name: "LOCALDOMAIN", Value: "collector.example.com"}), "spec.env[1]", "LOCALDOMAIN"},
			"a proxy behind ordinary names": {withEnv(calibanv1alpha1.EnvVar{Name: "LOG_LEVEL", Value: "debug"}, proxy), "spec.env[2]", "HTTPS_PROXY"},
		} {
			err := dryRunUpdateWorkspace(asBob, ns, "shared", tc.edit)
			if err := framework.IsForbidden(err, notSet(tc.field, tc.name)...); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		err := dryRunUpdateWorkspace(asBob, ns, "proxied", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.Env[1].Value = "http://collector.example.com:3128"
		})
		if err := framework.IsForbidden(err, notSet("spec.env[1]", "HTTPS_PROXY")...); err != nil {
			t.Errorf("a proxy's new value: %v", err)
		}
		_, err = asBob.CalibanV1alpha1().Workspaces(ns).Create(ctx, newWorkspace(ns, "bobs", withEnv(proxy)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("a Workspace of his own whose every key he may read, with a proxy: %v", err)
		}
	})

	t.Run("bob may edit what leaves the keys where they go", func(t *testing.T) {
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "proxied", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.DisplayName = "Edited by bob"
			s.Env = append(s.Env, calibanv1alpha1.EnvVar{Name: "LOG_LEVEL", Value: "debug"}, calibanv1alpha1.EnvVar{Name: "GIT_AUTHOR_NAME", Value: "bob"})
		}); err != nil {
			t.Errorf("bob's edit next to an unchanged proxy: %v", err)
		}
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "proxied", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.Env = append([]calibanv1alpha1.EnvVar{{Name: "FIRST", Value: "1"}}, s.Env...)
		}); err != nil {
			t.Errorf("bob moving the unchanged proxy down the list: %v", err)
		}
		if _, err := framework.TryUpdateWorkspace(ctx, asBob, ns, "proxied", func(s *calibanv1alpha1.WorkspaceSpec) {
			s.Env = workspaceSpec().Env
		}); err != nil {
			t.Errorf("bob removing the proxy: %v", err)
		}
	})

	t.Run("alice, who may get every key, may re-point them", func(t *testing.T) {
		if _, err := framework.TryUpdateWorkspace(ctx, asAlice, ns, "shared", withEnv(proxy,
			calibanv1alpha1.EnvVar{Name: "NODE_EXTRA_CA_CERTS", Value: "/work/caliban/ca.pem"})); err != nil {
			t.Errorf("alice adding a proxy and its CA: %v", err)
		}
	})

	removeAdmission(t, component)
}

// dryRunUpdateWorkspace sends the Workspace changed by mutate through
// client as a dry run: the answer is admission's, and nothing is stored.
func dryRunUpdateWorkspace(client calibanclient.Interface, ns, name string, mutate func(*calibanv1alpha1.WorkspaceSpec)) error {
	ws, err := client.CalibanV1alpha1().Workspaces(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	mutate(&ws.Spec)
	_, err = client.CalibanV1alpha1().Workspaces(ns).Update(ctx, ws, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// TestTheAdmissionComponentLetsATaskNameOnlyARouterConfigItsWriterMayRead:
// a task's model.routerConfigRef names a ConfigMap that is mounted into
// its agent pod as caliban's model-router configuration, which says where
// the agents' requests go. With the component, naming one needs get on it,
// on create and when it changes; other edits need none.
//
// Not parallel, as TestTheAdmissionComponentGatesUnattendedWork.
func TestTheAdmissionComponentLetsATaskNameOnlyARouterConfigItsWriterMayRead(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	for _, name := range []string{"router", "team-router"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"caliban.toml": "[router]\n"}}
		if _, err := cluster.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	user := func(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }
	allowToWriteTasks(t, ns, user(alice), user(bob))
	getConfigMaps := func(names ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: names, Verbs: []string{"get"}}}
	}
	allow(t, ns, "router", getConfigMaps("router"), user(alice), user(bob))
	allow(t, ns, "team-router", getConfigMaps("team-router"), user(alice))
	asAlice, asBob := clientAs(t, alice), clientAs(t, bob)
	withRouter := func(name string) func(*calibanv1alpha1.CalibanTaskSpec) {
		return func(s *calibanv1alpha1.CalibanTaskSpec) { s.Model = &calibanv1alpha1.ModelSpec{RouterConfigRef: name} }
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	t.Run("without the component, bob may name a ConfigMap he may not read", func(t *testing.T) {
		framework.Eventually(t, settleTimeout, func() error {
			_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "ws", withRouter("team-router")), dryRun)
			return err
		})
	})

	component := installAdmission(t)
	waitInForce(t, "caliban-secret-refs on routerConfigRef", func() error {
		_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "probe", "ws", withRouter("team-router")), dryRun)
		return framework.IsForbidden(err, "may not get ConfigMap")
	})
	refused := "spec.model.routerConfigRef: bob may not get ConfigMap 'team-router' in namespace '" + ns + "', so may not name it"

	t.Run("bob may not name a ConfigMap he may not get", func(t *testing.T) {
		_, err := asBob.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, newTask(ns, "bobs", "ws", withRouter("team-router")), metav1.CreateOptions{})
		if err := framework.IsForbidden(err, refused); err != nil {
			t.Errorf("on create: %v", err)
		}
		createAs(t, asBob, newTask(ns, "routed", "ws", withRouter("router")))
		_, err = framework.TryUpdateTask(ctx, asBob, ns, "routed", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.Model.RouterConfigRef = "team-router" })
		if err := framework.IsForbidden(err, refused); err != nil {
			t.Errorf("changed to it: %v", err)
		}
	})

	t.Run("alice may, and bob may edit her task but for its router", func(t *testing.T) {
		createAs(t, asAlice, newTask(ns, "alices", "ws", withRouter("team-router")))
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "alices", func(tk *calibanv1alpha1.CalibanTask) {
			tk.Spec.Task.Prompt = "Summarise the repository layout, briefly."
		}); err != nil {
			t.Errorf("bob's edit of the prompt: %v", err)
		}
		if _, err := framework.TryUpdateTask(ctx, asBob, ns, "alices", func(tk *calibanv1alpha1.CalibanTask) { tk.Spec.Model = nil }); err != nil {
			t.Errorf("bob dropping the router: %v", err)
		}
	})

	removeAdmission(t, component)
}
