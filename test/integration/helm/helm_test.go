// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package helm_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

const (
	operatorNamespace = framework.OperatorNamespace
	operatorName      = framework.OperatorServiceAccount
	crdsRelease       = "caliban-crds"
	operatorRelease   = "caliban-operator"
)

// The admission component's ValidatingAdmissionPolicies, each bound under
// its own name.
var validatingPolicies = []string{"caliban-unattended", "caliban-requested-by", "caliban-status", "caliban-secret-refs", "caliban-pod-labels"}

var crdNames = []string{"calibantasks." + calibanv1alpha1.GroupName, "workspaces." + calibanv1alpha1.GroupName}

// helmConfig is the Helm SDK's configuration for the test cluster, its
// releases stored as Secrets in the release namespace, as the CLI does.
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := cluster.Kubeconfig, operatorNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, operatorNamespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func install(t *testing.T, cfg *action.Configuration, release, chart string, values map[string]any) {
	t.Helper()
	ch, err := loader.Load(filepath.Join(cluster.Root, chart))
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = release
	inst.Namespace = operatorNamespace
	inst.CreateNamespace = true
	// Nothing runs the Deployment's pods here: the test runs the binary.
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = time.Minute
	if _, err := inst.RunWithContext(context.Background(), ch, values); err != nil {
		t.Fatalf("helm install %s %s: %v", release, chart, err)
	}
}

func uninstall(t *testing.T, cfg *action.Configuration, release string) string {
	t.Helper()
	u := action.NewUninstall(cfg)
	u.WaitStrategy = kube.HookOnlyStrategy
	u.Timeout = time.Minute
	resp, err := u.Run(release)
	if err != nil {
		t.Fatalf("helm uninstall %s: %v", release, err)
	}
	return resp.Info
}

func TestTheChartsInstallUpgradeAndUninstall(t *testing.T) {
	ctx := context.Background()
	cfg := helmConfig(t)

	install(t, cfg, crdsRelease, framework.CRDsChart, nil)
	framework.Eventually(t, time.Minute, func() error {
		for _, name := range crdNames {
			crd, err := cluster.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == "Established" && c.Status == "True")
			}
			if !established {
				return fmt.Errorf("CRD %s is not Established", name)
			}
		}
		return nil
	})
	install(t, cfg, operatorRelease, framework.OperatorChart, nil)

	t.Run("the operator chart installs the operator's objects", func(t *testing.T) {
		kube := cluster.Kube
		checks := map[string]func() error{
			"ServiceAccount": func() error {
				_, err := kube.CoreV1().ServiceAccounts(operatorNamespace).Get(ctx, operatorName, metav1.GetOptions{})
				return err
			},
			"ClusterRole": func() error {
				_, err := kube.RbacV1().ClusterRoles().Get(ctx, operatorName, metav1.GetOptions{})
				return err
			},
			"ClusterRoleBinding": func() error {
				_, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, operatorName, metav1.GetOptions{})
				return err
			},
			"leader-election Role": func() error {
				_, err := kube.RbacV1().Roles(operatorNamespace).Get(ctx, operatorName+"-leader-election", metav1.GetOptions{})
				return err
			},
			"leader-election RoleBinding": func() error {
				_, err := kube.RbacV1().RoleBindings(operatorNamespace).Get(ctx, operatorName+"-leader-election", metav1.GetOptions{})
				return err
			},
			"Deployment": func() error {
				_, err := kube.AppsV1().Deployments(operatorNamespace).Get(ctx, operatorName, metav1.GetOptions{})
				return err
			},
			// The cluster serves the admission policy kinds, so the
			// component is on by default.
			"admission policies": func() error {
				for _, name := range validatingPolicies {
					if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
				}
				_, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "caliban-requested-by", metav1.GetOptions{})
				return err
			},
			"admission parameters": func() error {
				_, err := kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, "caliban-unattended", metav1.GetOptions{})
				return err
			},
		}
		for name, check := range checks {
			if err := check(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("the installed operator takes a task to Running on the chart's RBAC", func(t *testing.T) {
		env := deploymentEnv(t)
		kubeconfig, err := cluster.OperatorKubeconfig(ctx, t.TempDir(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The chart's metrics address gives way to a free loopback port.
		env = append(env, "KUBECONFIG="+kubeconfig, "POD_NAME=helm-0", "CONTROLLER_POD_NAME=helm-0",
			"CALIBAN_LEASE_NAMESPACE="+operatorNamespace)
		if _, err := framework.RunOperator(t, framework.OperatorOptions{
			Name: "helm", Binary: operatorBinary(t), Env: env,
			StopTimeout: 30 * time.Second, CheckStop: framework.StopCleanly,
		}); err != nil {
			t.Fatal(err)
		}
		ns := cluster.Namespace(t, nil)
		cluster.CreateDemoWorkspace(t, ns, "ws", "Helm integration workspace")
		cluster.WaitForWorkspaceReady(t, ns, "ws")
		cluster.CreateDemoTask(t, ns, "task", "ws")
		cluster.WaitForTaskRunning(t, ns, "task", time.Minute)
		lease, err := cluster.Kube.CoordinationV1().Leases(operatorNamespace).Get(ctx, "caliban-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "helm-0" {
			t.Errorf("lease holder %v, want helm-0", lease.Spec.HolderIdentity)
		}
	})

	t.Run("an upgrade with a changed value changes the Deployment's env", func(t *testing.T) {
		ch, err := loader.Load(filepath.Join(cluster.Root, framework.OperatorChart))
		if err != nil {
			t.Fatal(err)
		}
		up := action.NewUpgrade(cfg)
		up.Namespace = operatorNamespace
		up.WaitStrategy = kube.HookOnlyStrategy
		up.Timeout = time.Minute
		if _, err := up.RunWithContext(ctx, operatorRelease, ch, map[string]any{
			"workers": 8, "log": map[string]any{"verbosity": 2}}); err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		got := map[string]string{}
		for _, kv := range deploymentEnv(t) {
			name, value, _ := strings.Cut(kv, "=")
			got[name] = value
		}
		for name, want := range map[string]string{"CALIBAN_WORKERS": "8", "CALIBAN_LOG_VERBOSITY": "2", "CALIBAN_LOG_FORMAT": "text"} {
			if got[name] != want {
				t.Errorf("after the upgrade %s=%q, want %q", name, got[name], want)
			}
		}
	})

	t.Run("uninstalling removes the operator and keeps the CRDs and tasks", func(t *testing.T) {
		ns := cluster.Namespace(t, nil)
		cluster.CreateDemoWorkspace(t, ns, "kept", "Helm integration workspace")

		uninstall(t, cfg, operatorRelease)
		framework.Eventually(t, time.Minute, func() error {
			for what, err := range map[string]error{
				"Deployment":           get(cluster.Kube.AppsV1().Deployments(operatorNamespace).Get(ctx, operatorName, metav1.GetOptions{})),
				"ServiceAccount":       get(cluster.Kube.CoreV1().ServiceAccounts(operatorNamespace).Get(ctx, operatorName, metav1.GetOptions{})),
				"ClusterRole":          get(cluster.Kube.RbacV1().ClusterRoles().Get(ctx, operatorName, metav1.GetOptions{})),
				"ClusterRoleBinding":   get(cluster.Kube.RbacV1().ClusterRoleBindings().Get(ctx, operatorName, metav1.GetOptions{})),
				"leader-election Role": get(cluster.Kube.RbacV1().Roles(operatorNamespace).Get(ctx, operatorName+"-leader-election", metav1.GetOptions{})),
				"caliban-status":       get(cluster.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "caliban-status", metav1.GetOptions{})),
				"caliban-requested-by": get(cluster.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "caliban-requested-by", metav1.GetOptions{})),
			} {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s is still there after helm uninstall (%v)", what, err)
				}
			}
			return nil
		})

		info := uninstall(t, cfg, crdsRelease)
		for _, name := range crdNames {
			if !strings.Contains(info, name) {
				t.Errorf("helm uninstall does not name the kept CRD %s: %q", name, info)
			}
			if _, err := cluster.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("CRD %s after helm uninstall: %v; the keep policy should leave it", name, err)
			}
		}
		if _, err := cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Errorf("Workspace kept after helm uninstall: %v", err)
		}
		releases, err := cluster.Kube.CoreV1().Secrets(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			t.Fatal(err)
		}
		if len(releases.Items) != 0 {
			t.Errorf("%d Helm release Secrets remain after uninstalling both charts", len(releases.Items))
		}
	})
}

// get keeps only the error of a client Get.
func get[T any](_ T, err error) error { return err }

// deploymentEnv is the installed Deployment's operator env as NAME=value,
// literal values only: the downward-API ones are the test's to set.
func deploymentEnv(t *testing.T) []string {
	t.Helper()
	d, err := cluster.Kube.AppsV1().Deployments(operatorNamespace).Get(context.Background(), operatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return literalEnv(t, d)
}

func literalEnv(t *testing.T, d *appsv1.Deployment) []string {
	t.Helper()
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	var env []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	if len(env) < 30 {
		t.Fatalf("the Deployment sets only %d literal env values", len(env))
	}
	return env
}
