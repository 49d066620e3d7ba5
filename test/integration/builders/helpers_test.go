// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders_test

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// fieldManager is the operator's: these tests apply what the operator
// would apply, under its name.
const fieldManager = builders.FieldManager

// scenario is one set of builder inputs. The task is created in the cluster
// first, so the children point at a real owner whose UID the builders use;
// otherwise the garbage collector would delete them.
type scenario struct {
	task     calibanv1alpha1.CalibanTaskSpec
	pin      *calibanv1alpha1.ResolvedWorkspace
	settings config.AgentSettings
}

// minimalScenario: default settings, one provider, one source.
func minimalScenario() scenario {
	return scenario{
		task: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "refactor the auth module"},
		},
		pin: &calibanv1alpha1.ResolvedWorkspace{
			Sources: []calibanv1alpha1.Source{{Name: "caliban", Repo: "git@x:caliban", Ref: "main", Path: "/work/caliban"}},
			Provider: calibanv1alpha1.Provider{
				Name: "claude", Kind: "anthropic",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "anthropic-key", Key: "api-key"},
			},
		},
		settings: config.DefaultAgentSettings(),
	}
}

// everyFeatureScenario uses every input the builders read. runtimeClass is
// the task's RuntimeClass; "" leaves isolation out.
func everyFeatureScenario(runtimeClass string) scenario {
	s := scenario{
		task: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "refactor the auth module"},
			Model:        &calibanv1alpha1.ModelSpec{Name: "gpt-5", RouterConfigRef: "team-router"},
			State: &calibanv1alpha1.StateSpec{
				GonzaloEndpoint: "http://gonzalod.storage.svc:8080",
				Mode:            "remote",
				TokenRef:        &calibanv1alpha1.SecretKeyRef{SecretName: "gonzalo-token", Key: "token"},
			},
		},
		pin: &calibanv1alpha1.ResolvedWorkspace{
			Sources: []calibanv1alpha1.Source{
				{Name: "caliban", Repo: "git@x:caliban", Ref: "main", Path: "/work/caliban"},
				{Name: "docs", Repo: "https://example.com/it's.git", Ref: "release-1.2", Path: "/work/docs"},
			},
			Provider: calibanv1alpha1.Provider{
				Name: "coder", Kind: "openai", BaseURL: "https://llm.internal/v1", Model: "gpt-5",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "openai-key", Key: "api-key"},
			},
			Env: []calibanv1alpha1.EnvVar{
				{Name: "LOG_LEVEL", Value: "debug"},
				{Name: "CALIBAN_NO_MCP", Value: "false"},
			},
			Egress: &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{
				{CIDR: "10.0.0.0/8", Ports: []int32{443, 8080}},
				{CIDR: "2001:db8::/32"},
			}},
			AgentPolicy: &calibanv1alpha1.AgentPolicy{
				AllowUnattended:         true,
				PermissionMode:          calibanv1alpha1.PermissionModeDontAsk,
				AutoAllow:               new(true),
				NoPermissions:           new(false),
				NoMCP:                   new(true),
				NoHooks:                 new(true),
				NoSkills:                new(true),
				NoSubAgent:              new(true),
				StrictKnownMarketplaces: new(true),
				EnabledPlugins:          []string{},
				BlockedMarketplaces:     []string{"https://bad.example/market"},
				ParallelToolLimit:       new(int32(4)),
			},
		},
		settings: config.DefaultAgentSettings(),
	}
	if runtimeClass != "" {
		s.task.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: runtimeClass}
		s.pin.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "not-" + runtimeClass}
	}
	// Limits too, so every resources field reaches the server.
	s.settings.CalibandResources.Limits = config.DefaultAgentSettings().CalibandResources.Requests.DeepCopy()
	return s
}

// createTask creates the owner task in ns and returns it as the API
// returned it (with its UID).
func createTask(t *testing.T, ns, name string, spec calibanv1alpha1.CalibanTaskSpec) *calibanv1alpha1.CalibanTask {
	t.Helper()
	task, err := cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(context.Background(), &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the owner task: %v", err)
	}
	if task.UID == "" {
		t.Fatal("the created task has no UID")
	}
	return task
}

// convert round-trips v through JSON into T: an applyconfiguration read as
// the typed object it describes.
func convert[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// appliedBy reports whether manager owns fields of obj through Apply.
func appliedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply && f.Subresource == "" {
			return true
		}
	}
	return false
}
