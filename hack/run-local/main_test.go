// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestChildEnvLocal(t *testing.T) {
	user := []string{
		"PATH=/usr/bin",
		"KUBECONFIG=/home/me/.kube/prod",
		"CALIBAN_WORKERS=2",
		"CALIBAND_IMAGE=example.com/caliban:dev",
		"CALIBAN_OPERATOR_BINARY=/tmp/fake-operator",
	}
	env := childEnv(user, "/tmp/caliban-local-1/kubeconfig")

	want := map[string]string{
		// The cluster's kubeconfig replaces the user's.
		"KUBECONFIG": "/tmp/caliban-local-1/kubeconfig",
		// Defaults for what the user did not set.
		"CALIBAN_LEADER_ELECTION":      "false",
		"CALIBAN_METRICS_BIND_ADDRESS": "127.0.0.1:8080",
		// The user's environment passes through.
		"PATH":            "/usr/bin",
		"CALIBAN_WORKERS": "2",
		"CALIBAND_IMAGE":  "example.com/caliban:dev",
	}
	for name, v := range want {
		if got, ok := lookup(env, name); !ok || got != v {
			t.Errorf("%s = %q (set: %v), want %q", name, got, ok, v)
		}
	}
	if _, ok := lookup(env, binaryEnv); ok {
		t.Errorf("%s reached the operator: %v", binaryEnv, env)
	}
	assertUnique(t, env)
}

func TestChildEnvUserOverridesDefaults(t *testing.T) {
	user := []string{
		"CALIBAN_LEADER_ELECTION=true",
		"CALIBAN_LEASE_NAMESPACE=default",
		// Set but empty counts as set: it is the user's to decide.
		"CALIBAN_METRICS_BIND_ADDRESS=",
	}
	env := childEnv(user, "/k")
	for name, v := range map[string]string{
		"CALIBAN_LEADER_ELECTION":      "true",
		"CALIBAN_LEASE_NAMESPACE":      "default",
		"CALIBAN_METRICS_BIND_ADDRESS": "",
		"KUBECONFIG":                   "/k",
	} {
		if got, ok := lookup(env, name); !ok || got != v {
			t.Errorf("%s = %q (set: %v), want %q", name, got, ok, v)
		}
	}
	assertUnique(t, env)
}

func TestChildEnvKubeconfigMode(t *testing.T) {
	// No cluster kubeconfig: the user's KUBECONFIG is kept as it is.
	env := childEnv([]string{"KUBECONFIG=/a:/b"}, "")
	if got, _ := lookup(env, "KUBECONFIG"); got != "/a:/b" {
		t.Errorf("KUBECONFIG = %q, want the user's /a:/b", got)
	}
	if got, _ := lookup(env, "CALIBAN_LEADER_ELECTION"); got != "false" {
		t.Errorf("CALIBAN_LEADER_ELECTION = %q, want false", got)
	}
	assertUnique(t, env)
}

func assertUnique(t *testing.T, env []string) {
	t.Helper()
	var names []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(names, name) {
			t.Errorf("%s appears twice in %v", name, env)
		}
		names = append(names, name)
	}
}

func TestLocalMode(t *testing.T) {
	for _, tc := range []struct {
		kubeconfig, local string
		want              bool
	}{
		{"", "", true},
		{"", "0", true}, // nothing else to run against
		{"/k", "", false},
		{"/k", "0", false},
		{"/k", "1", true},
		{"/k", "true", true},
		{"/k", " Yes ", true},
		{"/k", "on", true},
		{"/k", "nope", false},
	} {
		if got := localMode(tc.kubeconfig, tc.local); got != tc.want {
			t.Errorf("localMode(%q, %q) = %v, want %v", tc.kubeconfig, tc.local, got, tc.want)
		}
	}
}

func TestOperatorBinary(t *testing.T) {
	if got := operatorBinary("/repo", ""); got != filepath.Join("/repo", "bin", "caliban-operator") {
		t.Errorf("default = %q", got)
	}
	if got := operatorBinary("/repo", "/tmp/fake"); got != "/tmp/fake" {
		t.Errorf("override = %q", got)
	}
}

func TestExitCode(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for script, want := range map[string]int{
		"exit 0":        0,
		"exit 3":        3,
		"kill -TERM $$": 143,
	} {
		cmd := exec.Command(sh, "-c", script)
		_ = cmd.Run()
		if got := exitCode(cmd.ProcessState); got != want {
			t.Errorf("%q: exit code %d, want %d", script, got, want)
		}
	}
	if got := exitCode((*os.ProcessState)(nil)); got != 1 {
		t.Errorf("nil state: %d, want 1", got)
	}
}

func TestReadSamples(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("00-secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n---\napiVersion: caliban.caliban-ai.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: w\n")
	write("kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- 00-secret.yaml\n")
	objs, err := readSamples(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := []string{"Secret/s", "Workspace/w"}; !slices.Equal(got, want) {
		t.Errorf("samples = %v, want %v", got, want)
	}
}

func TestRepoSamples(t *testing.T) {
	// The repository's samples: what LOCAL mode applies, in order.
	objs, err := readSamples(filepath.Join("..", "..", "manifests", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			t.Errorf("%s/%s names namespace %s; samples go where run-local puts them", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		kinds[o.GetKind()]++
	}
	if kinds["Workspace"] != 2 || kinds["CalibanTask"] != 2 || kinds["Secret"] == 0 {
		t.Errorf("samples hold %v, want two Workspaces (one with a private source), two CalibanTasks (one with a lifecycle) and Secrets", kinds)
	}
}
