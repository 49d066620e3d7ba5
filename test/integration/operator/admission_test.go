// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// admittedWithin bounds how long after its workspace turns Ready a waiting
// task may take to run. Such tasks are woken at once
// (docs/architecture.md#what-wakes-a-task) through the workspace index; their
// own requeues come only every 10 s (Pending workspace) or 30 s (failed
// admission), so this tells the two apart.
const admittedWithin = 7 * time.Second

func TestUnsupervisedWorkNeedsTheWorkspacesPermission(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "posture", ns)
	createProviderSecret(t, ns)

	t.Run("each unsupervised request fails until the workspace allows it", func(t *testing.T) {
		t.Parallel()
		tests := map[string]struct {
			workspace string
			policy    *calibanv1alpha1.AgentPolicy
			task      func(*calibanv1alpha1.CalibanTaskSpec)
			posture   calibanv1alpha1.PermissionPosture
			naming    []string
		}{
			"an unattended task": {
				workspace: "strict", task: unattended, posture: calibanv1alpha1.PostureUnattended,
				naming: []string{"unattended", "agentPolicy.allowUnattended", "workspace 'strict'"},
			},
			"a supervised task on a workspace with permissionMode dontAsk": {
				workspace: "dont-ask", policy: &calibanv1alpha1.AgentPolicy{PermissionMode: calibanv1alpha1.PermissionModeDontAsk},
				posture: calibanv1alpha1.PostureSupervised,
				naming:  []string{"agentPolicy.permissionMode dontAsk", "agentPolicy.allowUnattended", "workspace 'dont-ask'"},
			},
			"a supervised task on a workspace with autoAllow": {
				workspace: "auto-allow", policy: &calibanv1alpha1.AgentPolicy{AutoAllow: new(true)},
				posture: calibanv1alpha1.PostureSupervised,
				naming:  []string{"agentPolicy.autoAllow", "agentPolicy.allowUnattended", "workspace 'auto-allow'"},
			},
			"a supervised task on a workspace with noPermissions": {
				workspace: "no-permissions", policy: &calibanv1alpha1.AgentPolicy{NoPermissions: new(true)},
				posture: calibanv1alpha1.PostureSupervised,
				naming:  []string{"agentPolicy.noPermissions", "agentPolicy.allowUnattended", "workspace 'no-permissions'"},
			},
		}
		for name, test := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				createReadyWorkspace(t, ns, test.workspace, func(spec *calibanv1alpha1.WorkspaceSpec) { spec.AgentPolicy = test.policy })
				taskName := "on-" + test.workspace
				var mutate []func(*calibanv1alpha1.CalibanTaskSpec)
				if test.task != nil {
					mutate = append(mutate, test.task)
				}
				createTask(t, ns, taskName, test.workspace, mutate...)

				task := waitForTask(t, ns, taskName, settleTimeout, failedNaming(builders.ReasonPostureNotPermitted, test.naming...))
				if task.Status.ResolvedWorkspace != nil || task.Status.PermissionPosture != "" {
					t.Errorf("a refused task was pinned: %s", statusJSON(task.Status))
				}
				waitForEvent(t, ns, taskName, corev1.EventTypeWarning, builders.ReasonPostureNotPermitted, noteContains(test.naming...))
				if sb := getSandbox(t, ns, builders.SandboxName(taskName)); sb != nil {
					t.Errorf("a refused task got a Sandbox")
				}

				framework.UpdateWorkspace(t, cluster.Caliban, ns, test.workspace, func(spec *calibanv1alpha1.WorkspaceSpec) {
					if spec.AgentPolicy == nil {
						spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{}
					}
					spec.AgentPolicy.AllowUnattended = true
				})
				task = waitForTask(t, ns, taskName, settleTimeout, isRunning)
				if task.Status.PermissionPosture != test.posture {
					t.Errorf("permissionPosture %q, want %q", task.Status.PermissionPosture, test.posture)
				}
				if test.posture == calibanv1alpha1.PostureUnattended {
					waitForEvent(t, ns, taskName, corev1.EventTypeNormal, "UnattendedAdmitted", noteContains("'"+test.workspace+"'"))
				} else if got := eventsWithReason(t, ns, taskName, "UnattendedAdmitted"); len(got) > 0 {
					t.Errorf("a supervised task got UnattendedAdmitted Events: %+v", got)
				}

				if test.posture != calibanv1alpha1.PostureUnattended {
					return
				}
				// Revoking the permission does not reach the pinned task,
				// even when the operator looks at it again.
				gen := framework.UpdateWorkspace(t, cluster.Caliban, ns, test.workspace, func(spec *calibanv1alpha1.WorkspaceSpec) { spec.AgentPolicy.AllowUnattended = false })
				waitForWorkspaceGeneration(t, ns, test.workspace, gen)
				taskGen := touchTask(t, ns, taskName)
				task = waitForTask(t, ns, taskName, settleTimeout, func(task *calibanv1alpha1.CalibanTask) error {
					if task.Status.ObservedGeneration != taskGen {
						return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, taskGen)
					}
					return isRunning(task)
				})
				if task.Status.PermissionPosture != calibanv1alpha1.PostureUnattended {
					t.Errorf("permissionPosture %q after the revocation, want unattended", task.Status.PermissionPosture)
				}
			})
		}
	})

	t.Run("a pinned supervised task edited to unattended fails when its pin does not allow it", func(t *testing.T) {
		t.Parallel()
		createReadyWorkspace(t, ns, "supervised-only")
		createTask(t, ns, "edited", "supervised-only")
		waitForTask(t, ns, "edited", settleTimeout, isRunning)

		framework.UpdateTask(t, cluster.Caliban, ns, "edited", unattended)
		task := waitForTask(t, ns, "edited", settleTimeout,
			failedNaming(builders.ReasonPostureNotPermitted, "unattended", "agentPolicy.allowUnattended"))
		if task.Status.PermissionPosture != calibanv1alpha1.PostureSupervised {
			t.Errorf("permissionPosture %q, want the admitted supervised", task.Status.PermissionPosture)
		}
		waitForEvent(t, ns, "edited", corev1.EventTypeWarning, builders.ReasonPostureNotPermitted, nil)

		// The workspace allowing it now does not change the pin.
		gen := framework.UpdateWorkspace(t, cluster.Caliban, ns, "supervised-only", func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
		})
		waitForWorkspaceGeneration(t, ns, "supervised-only", gen)
		taskGen := touchTask(t, ns, "edited")
		waitForTask(t, ns, "edited", settleTimeout, func(task *calibanv1alpha1.CalibanTask) error {
			if task.Status.ObservedGeneration != taskGen {
				return fmt.Errorf("observedGeneration %d, want %d", task.Status.ObservedGeneration, taskGen)
			}
			return failedNaming(builders.ReasonPostureNotPermitted, "agentPolicy.allowUnattended")(task)
		})

		// Back to supervised: the task runs again, without a stale failure.
		framework.UpdateTask(t, cluster.Caliban, ns, "edited", func(spec *calibanv1alpha1.CalibanTaskSpec) {
			spec.Task.PermissionPosture = calibanv1alpha1.PostureSupervised
		})
		waitForTask(t, ns, "edited", settleTimeout, isRunning)
	})
}

func eventsWithReason(t testing.TB, ns, task, reason string) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range eventsAbout(t, ns, "CalibanTask", task) {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestAWorkspaceRecoversOnceItsSecretExists(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "workspace", ns)
	// The provider rows name Secrets of their own; the source rows need
	// the provider's.
	createProviderSecret(t, ns)

	withProviderSecret := func(name string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].CredentialsRef.SecretName = name }
	}
	withPrivateSource := func(repo, secret string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Sources[0].Repo = repo
			spec.Sources[0].CredentialsRef = &calibanv1alpha1.SourceCredentialsRef{SecretName: secret}
		}
	}
	basicAuth := map[string]string{corev1.BasicAuthUsernameKey: "bot", corev1.BasicAuthPasswordKey: "token"}
	tests := map[string]struct {
		secret    string
		workspace func(*calibanv1alpha1.WorkspaceSpec)
		// before makes the Secret as it is while the workspace fails (nil:
		// no Secret at all); fix makes it right.
		before func(t *testing.T, name string)
		fix    func(t *testing.T, name string)
		want   string
	}{
		"a missing provider Secret": {
			secret: "missing-key", workspace: withProviderSecret("missing-key"),
			fix: func(t *testing.T, name string) {
				createSecret(t, ns, name, map[string]string{providerKey: "sk-ant-test"})
			},
			want: "provider 'planner': secret 'missing-key' key 'api-key' not found",
		},
		"a provider Secret that lacks the key": {
			secret: "keyless", workspace: withProviderSecret("keyless"),
			before: func(t *testing.T, name string) { createSecret(t, ns, name, map[string]string{"token": "x"}) },
			fix: func(t *testing.T, name string) {
				updateSecretData(t, ns, name, map[string]string{providerKey: "sk-ant-test"})
			},
			want: "provider 'planner': secret 'keyless' key 'api-key' not found",
		},
		"a missing source Secret": {
			secret: "git-missing", workspace: withPrivateSource("https://git.example.com/team/app.git", "git-missing"),
			fix:  func(t *testing.T, name string) { createTypedSecret(t, ns, name, corev1.SecretTypeBasicAuth, basicAuth) },
			want: "sources[0] 'caliban': secret 'git-missing' not found",
		},
		"an Opaque source Secret on an https repo, replaced by a basic-auth one": {
			secret: "git-opaque", workspace: withPrivateSource("https://git.example.com/team/app.git", "git-opaque"),
			before: func(t *testing.T, name string) { createSecret(t, ns, name, basicAuth) },
			fix: func(t *testing.T, name string) {
				// A Secret's type is immutable: replace it.
				if err := cluster.Kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				createTypedSecret(t, ns, name, corev1.SecretTypeBasicAuth, basicAuth)
			},
			want: "sources[0] 'caliban': secret 'git-opaque' is of type 'Opaque', but an https:// repo needs a kubernetes.io/basic-auth secret",
		},
		"an ssh-auth source Secret without known_hosts": {
			secret: "git-ssh", workspace: withPrivateSource("git@git.example.com:team/app.git", "git-ssh"),
			before: func(t *testing.T, name string) {
				createTypedSecret(t, ns, name, corev1.SecretTypeSSHAuth, map[string]string{corev1.SSHAuthPrivateKey: "key"})
			},
			fix: func(t *testing.T, name string) {
				updateSecretData(t, ns, name, map[string]string{builders.SSHKnownHostsKey: "git.example.com ssh-ed25519 AAAA"})
			},
			want: "sources[0] 'caliban': secret 'git-ssh' key 'known_hosts' not found (a kubernetes.io/ssh-auth secret needs 'ssh-privatekey' and 'known_hosts')",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := test.secret + "-ws"
			if test.before != nil {
				test.before(t, test.secret)
			}
			createWorkspace(t, ns, ws, test.workspace)
			waitForWorkspace(t, ns, ws, settleTimeout, func(w *calibanv1alpha1.Workspace) error {
				if w.Status.Phase != calibanv1alpha1.WorkspaceFailed || w.Status.Message != test.want {
					return fmt.Errorf("phase %q message %q, want Failed %q", w.Status.Phase, w.Status.Message, test.want)
				}
				if w.Status.ObservedGeneration != w.Generation {
					return fmt.Errorf("observedGeneration %d, want %d", w.Status.ObservedGeneration, w.Generation)
				}
				return nil
			})

			task := "waits-on-" + ws
			createTask(t, ns, task, ws)
			waitForTask(t, ns, task, settleTimeout,
				failedWith(builders.ReasonWorkspaceUnresolved, fmt.Sprintf("workspace '%s' not ready: %s", ws, test.want)))
			waitForEvent(t, ns, task, corev1.EventTypeWarning, builders.ReasonWorkspaceUnresolved, nil)

			test.fix(t, test.secret)
			// A failed workspace is re-checked every 15 s
			// (docs/crd-reference.md#requeue-intervals).
			waitForWorkspace(t, ns, ws, 20*time.Second, func(w *calibanv1alpha1.Workspace) error {
				if w.Status.Message != "" {
					return fmt.Errorf("message %q on a recovering workspace", w.Status.Message)
				}
				return workspaceReady(w)
			})
			waitForTask(t, ns, task, admittedWithin, isRunning)
		})
	}
}

// updateSecretData adds data to an existing Secret.
func updateSecretData(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	secret, err := cluster.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.StringData = data
	if _, err := cluster.Kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestATaskRecoversOnceWhatItNamesExists(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t, nil)
	startOperator(t, "names", ns)
	createProviderSecret(t, ns)
	createReadyWorkspace(t, ns, "demo")

	withToken := func(secret string) func(*calibanv1alpha1.CalibanTaskSpec) {
		return func(spec *calibanv1alpha1.CalibanTaskSpec) {
			spec.State = &calibanv1alpha1.StateSpec{
				GonzaloEndpoint: "http://gonzalod.storage.svc:8080",
				TokenRef:        &calibanv1alpha1.SecretKeyRef{SecretName: secret, Key: "token"},
			}
		}
	}

	t.Run("a missing token Secret", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "token-missing", "demo", withToken("gonzalo-token"))
		waitForTask(t, ns, "token-missing", settleTimeout,
			failedWith(builders.ReasonInvalidState, "state.tokenRef: secret 'gonzalo-token' not found"))
		waitForEvent(t, ns, "token-missing", corev1.EventTypeWarning, builders.ReasonInvalidState, nil)

		createSecret(t, ns, "gonzalo-token", map[string]string{"token": "gz-test"})
		// Secrets are read, not watched: the 30 s failure requeue finds it.
		waitForTask(t, ns, "token-missing", recheckTimeout, isRunning)
	})

	t.Run("a token Secret without the key", func(t *testing.T) {
		t.Parallel()
		createSecret(t, ns, "partial-token", map[string]string{"other": "x"})
		createTask(t, ns, "token-keyless", "demo", withToken("partial-token"))
		waitForTask(t, ns, "token-keyless", settleTimeout,
			failedWith(builders.ReasonInvalidState, "state.tokenRef: secret 'partial-token' has no key 'token'"))

		secret, err := cluster.Kube.CoreV1().Secrets(ns).Get(ctx, "partial-token", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secret.StringData = map[string]string{"token": "gz-test"}
		if _, err := cluster.Kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitForTask(t, ns, "token-keyless", recheckTimeout, isRunning)
	})

	t.Run("a provider the workspace does not have", func(t *testing.T) {
		t.Parallel()
		createReadyWorkspace(t, ns, "growing")
		createTask(t, ns, "wants-coder", "growing", func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.ProviderRef = "coder" })
		waitForTask(t, ns, "wants-coder", settleTimeout,
			failedWith(builders.ReasonWorkspaceUnresolved, "providerRef 'coder' names no provider in the workspace"))

		gen := framework.UpdateWorkspace(t, cluster.Caliban, ns, "growing", func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Providers = append(spec.Providers, calibanv1alpha1.Provider{Name: "coder", Kind: "openai", Model: "gpt-5"})
			spec.DefaultProvider = "planner"
		})
		waitForWorkspaceGeneration(t, ns, "growing", gen)
		// The workspace's new status wakes the task, long before its 30 s
		// requeue.
		task := waitForTask(t, ns, "wants-coder", admittedWithin, isRunning)
		if got := task.Status.ResolvedWorkspace.Provider; got.Name != "coder" || got.Kind != "openai" || got.Model != "gpt-5" {
			t.Errorf("pinned provider %+v, want coder (openai, gpt-5)", got)
		}
	})

	t.Run("a missing workspace", func(t *testing.T) {
		t.Parallel()
		createTask(t, ns, "early", "later")
		waitForTask(t, ns, "early", settleTimeout,
			failedWith(builders.ReasonWorkspaceUnresolved, "Workspace not found: 'later'"))
		waitForEvent(t, ns, "early", corev1.EventTypeWarning, builders.ReasonWorkspaceUnresolved, noteContains("'later'"))

		createWorkspace(t, ns, "later")
		waitForWorkspace(t, ns, "later", settleTimeout, workspaceReady)
		task := waitForTask(t, ns, "early", admittedWithin, isRunning)
		if task.Status.ResolvedWorkspace.Provider.Name != "planner" {
			t.Errorf("pinned provider %+v, want planner", task.Status.ResolvedWorkspace.Provider)
		}
	})
}
