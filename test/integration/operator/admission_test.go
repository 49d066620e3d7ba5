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

				updateWorkspace(t, ns, test.workspace, func(spec *calibanv1alpha1.WorkspaceSpec) {
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
				gen := updateWorkspace(t, ns, test.workspace, func(spec *calibanv1alpha1.WorkspaceSpec) { spec.AgentPolicy.AllowUnattended = false })
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

		updateTask(t, ns, "edited", unattended)
		task := waitForTask(t, ns, "edited", settleTimeout,
			failedNaming(builders.ReasonPostureNotPermitted, "unattended", "agentPolicy.allowUnattended"))
		if task.Status.PermissionPosture != calibanv1alpha1.PostureSupervised {
			t.Errorf("permissionPosture %q, want the admitted supervised", task.Status.PermissionPosture)
		}
		waitForEvent(t, ns, "edited", corev1.EventTypeWarning, builders.ReasonPostureNotPermitted, nil)

		// The workspace allowing it now does not change the pin.
		gen := updateWorkspace(t, ns, "supervised-only", func(spec *calibanv1alpha1.WorkspaceSpec) {
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
		updateTask(t, ns, "edited", func(spec *calibanv1alpha1.CalibanTaskSpec) {
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

	tests := map[string]struct {
		secret string
		// before is the Secret's data while the workspace fails (nil: no
		// Secret at all).
		before map[string]string
	}{
		"a missing Secret":            {secret: "missing-key"},
		"a Secret that lacks the key": {secret: "keyless", before: map[string]string{"token": "x"}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := test.secret + "-ws"
			if test.before != nil {
				createSecret(t, ns, test.secret, test.before)
			}
			createWorkspace(t, ns, ws, func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Providers[0].CredentialsRef.SecretName = test.secret
			})
			want := fmt.Sprintf("provider 'planner': secret '%s' key 'api-key' not found", test.secret)
			waitForWorkspace(t, ns, ws, settleTimeout, func(w *calibanv1alpha1.Workspace) error {
				if w.Status.Phase != calibanv1alpha1.WorkspaceFailed || w.Status.Message != want {
					return fmt.Errorf("phase %q message %q, want Failed %q", w.Status.Phase, w.Status.Message, want)
				}
				if w.Status.ObservedGeneration != w.Generation {
					return fmt.Errorf("observedGeneration %d, want %d", w.Status.ObservedGeneration, w.Generation)
				}
				return nil
			})

			task := "waits-on-" + ws
			createTask(t, ns, task, ws)
			waitForTask(t, ns, task, settleTimeout,
				failedWith(builders.ReasonWorkspaceUnresolved, fmt.Sprintf("workspace '%s' not ready: %s", ws, want)))
			waitForEvent(t, ns, task, corev1.EventTypeWarning, builders.ReasonWorkspaceUnresolved, nil)

			if test.before == nil {
				createSecret(t, ns, test.secret, map[string]string{providerKey: "sk-ant-test"})
			} else {
				secret, err := cluster.Kube.CoreV1().Secrets(ns).Get(ctx, test.secret, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				secret.StringData = map[string]string{providerKey: "sk-ant-test"}
				if _, err := cluster.Kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
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

		gen := updateWorkspace(t, ns, "growing", func(spec *calibanv1alpha1.WorkspaceSpec) {
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
