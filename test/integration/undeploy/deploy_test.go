// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package undeploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// TestMakeDeployKeepsTheImageItWasGiven runs make deploy as a user does,
// against the cluster: IMAGE=... runs that image, a later make deploy
// without IMAGE keeps it instead of switching back, and make deploy-reset
// returns to the release the tree names. Runs before the undeploy test,
// which removes what it installs.
func TestMakeDeployKeepsTheImageItWasGiven(t *testing.T) {
	root := cluster.Root
	if _, err := os.Stat(filepath.Join(root, "bin", "kubectl")); err != nil {
		t.Fatalf("kubectl is part of the test bed (make tools): %v", err)
	}
	state := filepath.Join(t.TempDir(), "image")
	tree := treeImage(t, root)
	for _, step := range []struct {
		name string
		args []string
		want string
	}{
		{"make deploy IMAGE=... runs that image", []string{"deploy", "IMAGE=registry.example/caliban-operator:test"}, "registry.example/caliban-operator:test"},
		{"a later make deploy keeps it", []string{"deploy"}, "registry.example/caliban-operator:test"},
		{"make deploy-reset goes back to the tree's release", []string{"deploy-reset"}, tree},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "-C", root, "DEPLOY_STATE=" + state}, step.args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", step.name, err, out)
		}
		d, err := cluster.Kube.AppsV1().Deployments(framework.OperatorNamespace).Get(context.Background(), "caliban-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != step.want {
			t.Errorf("%s: the Deployment runs %s, want %s", step.name, got, step.want)
		}
	}
}

// treeImage is the image manifests/base's Deployment names.
func treeImage(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "manifests", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if image, ok := strings.CutPrefix(strings.TrimSpace(line), "image: ghcr.io/caliban-ai/caliban-operator:"); ok {
			return "ghcr.io/caliban-ai/caliban-operator:" + image
		}
	}
	t.Fatal("manifests/base/deployment.yaml names no operator image")
	return ""
}
