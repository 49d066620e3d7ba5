// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
)

// The entry points in this file serve programs outside `go test` (hack/run-local,
// behind `make run`): a long-lived cluster with a fixed name, and clients for
// a cluster the framework did not create.

// StartNamed is Start for a cluster with a fixed name, such as the one
// `make run` keeps while the operator runs locally. A cluster of that name
// left behind by an earlier run (one killed with SIGKILL cannot clean up) is
// deleted first, with the kubeconfig directories of earlier runs
// ($TMPDIR/<name>-*), so the caller must make sure no other process still
// uses it.
// The name must not start with the test prefix, whose clusters are reaped as
// orphans once their test process is gone. On failure StartNamed deletes
// whatever it created and says where the component logs are.
func StartNamed(ctx context.Context, name string) (*Cluster, error) {
	if name == "" || strings.HasPrefix(name, namePrefix) {
		return nil, fmt.Errorf("cluster name %q is empty or starts with the test prefix %q", name, namePrefix)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Root: root, bin: filepath.Join(root, "bin")}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			return nil, fmt.Errorf("test bed binary %s is missing: run `make tools` (it builds bin/ from hack/tools)", filepath.Join(c.bin, b))
		}
	}
	reapOrphans(c.bin)

	// Kubeconfig directories of earlier runs that could not clean up.
	if stale, err := filepath.Glob(filepath.Join(os.TempDir(), c.Name+"-*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}

	c.LogsDir = filepath.Join(WorkDir(), "clusters", c.Name, "logs")
	tempDir, err := os.MkdirTemp("", c.Name+"-")
	if err != nil {
		return nil, err
	}
	// Set before deleting a leftover, so that kwokctl never touches the
	// user's kubeconfig; tempDir is recorded after, so that Delete keeps it.
	c.Kubeconfig = filepath.Join(tempDir, "kubeconfig")
	if _, err := os.Stat(filepath.Join(WorkDir(), "clusters", name)); err == nil {
		if err := c.Delete(); err != nil {
			_ = os.RemoveAll(tempDir)
			return nil, fmt.Errorf("deleting the leftover cluster %s: %w", name, err)
		}
	}
	c.tempDir = tempDir

	if err = c.create(ctx); err != nil {
		err = fmt.Errorf("%w\ncomponent logs: %s", err, c.KeepLogs())
		if derr := c.Delete(); derr != nil {
			err = fmt.Errorf("%w\ndeleting the cluster: %v", err, derr)
		}
		return nil, err
	}
	return c, nil
}

// Connect returns a Cluster for an existing cluster reached through cfg,
// with the clients, Apply and InstallCRDs. Its Name is empty, so Delete does
// nothing: the framework never deletes a cluster it did not create.
func Connect(cfg *rest.Config) (*Cluster, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Root: root, bin: filepath.Join(root, "bin"), Config: cfg}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Caliban, err = calibanclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.APIExt, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// WorkDir is where kwokctl keeps cluster state: KWOK_WORKDIR, else ~/.kwok.
func WorkDir() string {
	return workDir()
}

// SyncStages makes sure kwok runs a controller for each of the kwok Stages'
// resources. kwok starts one when it sees a Stage, but only if the
// apiserver already publishes that resource's OpenAPI v3 schema, and tries
// again only when a Stage changes. A CRD is Established before its schema is
// published, so Stages applied right after their CRD can leave the Sandbox
// stand-in dead for the cluster's lifetime ("failed to init stage controller:
// ... not found as OpenAPI V3 path" in kwok-controller.log). SyncStages
// waits until every such group-version is published, then touches each
// Stage (an annotation) so that kwok tries again.
func (c *Cluster) SyncStages(ctx context.Context) error {
	stages, err := ReadManifests(filepath.Join(c.Root, "test", "stages"))
	if err != nil {
		return err
	}
	if err := c.opts.adjustStages(stages); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, st := range stages {
		gv, _, _ := unstructured.NestedString(st.Object, "spec", "resourceRef", "apiGroup")
		if gv == "" || gv == "v1" {
			want["api/v1"] = true
		} else {
			want["apis/"+gv] = true
		}
	}

	published, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := openapi.NewClientWithContext(c.Kube.Discovery().RESTClient())
	for {
		paths, err := client.PathsWithContext(published)
		missing := []string{}
		for p := range want {
			if _, ok := paths[p]; !ok {
				missing = append(missing, p)
			}
		}
		if err == nil && len(missing) == 0 {
			break
		}
		select {
		case <-published.Done():
			return fmt.Errorf("the apiserver never published the OpenAPI v3 of %v (last error: %v)", missing, err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	return c.touchUntilPlayed(ctx, stages)
}

// touchUntilPlayed touches the Stages, then proves that kwok plays them: a
// probe Sandbox must turn Ready. On a loaded machine kwok has once missed
// the touch as well (a benchmark's Sandboxes stayed not ready for good).
// So the touch is tried once, and from then on kwok's controller is
// restarted before each touch: a fresh kwok reads the Stages and the
// apiserver's discovery as they are now, with nothing cached from before
// the CRD was served. It gives up after two minutes.
func (c *Cluster) touchUntilPlayed(ctx context.Context, stages []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	probes := c.Dynamic.Resource(sandboxResource).Namespace(metav1.NamespaceDefault)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sandboxResource.GroupVersion().String(),
		"kind":       "Sandbox",
		"metadata":   map[string]any{"name": "kwok-stage-probe"},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "probe", "image": "probe"}},
		}}},
	}}
	defer func() {
		_ = probes.Delete(context.Background(), probe.GetName(), metav1.DeleteOptions{})
	}()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			fmt.Fprintf(os.Stderr, "cluster %s: kwok did not play the Stages after touch %d; restarting kwok-controller\n", c.Name, attempt-1)
			if err := c.restartKwok(ctx); err != nil {
				return fmt.Errorf("kwok did not play the Stages, and restarting it failed: %w", err)
			}
		}
		stamp := time.Now().UTC().Format(time.RFC3339Nano)
		for _, st := range stages {
			anns := st.GetAnnotations()
			if anns == nil {
				anns = map[string]string{}
			}
			anns[stagesSyncedAnnotation] = stamp
			st.SetAnnotations(anns)
		}
		if err := c.Apply(ctx, "", stages...); err != nil {
			return err
		}
		if attempt == 1 {
			if _, err := probes.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating the Stages' probe Sandbox: %w", err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			got, err := probes.Get(ctx, probe.GetName(), metav1.GetOptions{})
			if err == nil && ConditionTrue(got, "Ready") {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kwok never made the probe Sandbox Ready after %d touches of its Stages (kwok-controller.log in the component logs)", attempt)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// restartKwok stops kwok's controller and runs it again with the same
// command line.
func (c *Cluster) restartKwok(ctx context.Context) error {
	if _, err := c.StopComponent(KwokController, 5*time.Second); err != nil {
		return err
	}
	return c.StartComponent(ctx, KwokController)
}

var sandboxResource = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// ConditionTrue reports whether the object's status has condition typ with
// status True, for kinds the tests read as unstructured (agent-sandbox's).
func ConditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// stagesSyncedAnnotation is the annotation SyncStages sets on the Stages.
const stagesSyncedAnnotation = "test.caliban.caliban-ai.dev/stages-synced"
