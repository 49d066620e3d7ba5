// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// agentPolicyVariables is docs/crd-reference.md#agentpolicy's table of the
// variables the agent policy projects and their fields, written out rather
// than taken from the operator's list, so a name left out of both the list
// and the schema rule still fails here.
var agentPolicyVariables = map[string]string{
	"CALIBAN_DEFAULT_PERMISSION_MODE":   "agentPolicy.permissionMode",
	"CALIBAN_AUTO_ALLOW":                "agentPolicy.autoAllow",
	"CALIBAN_NO_PERMISSIONS":            "agentPolicy.noPermissions",
	"CALIBAN_NO_MCP":                    "agentPolicy.noMcp",
	"CALIBAN_NO_HOOKS":                  "agentPolicy.noHooks",
	"CALIBAN_NO_SKILLS":                 "agentPolicy.noSkills",
	"CALIBAN_NO_SUB_AGENT":              "agentPolicy.noSubAgent",
	"CALIBAN_STRICT_KNOWN_MARKETPLACES": "agentPolicy.strictKnownMarketplaces",
	"CALIBAN_ENABLED_PLUGINS":           "agentPolicy.enabledPlugins",
	"CALIBAN_BLOCKED_MARKETPLACES":      "agentPolicy.blockedMarketplaces",
	"CALIBAN_PARALLEL_TOOL_LIMIT":       "agentPolicy.parallelToolLimit",
}

// A Workspace env entry naming one of the agent policy's variables would
// set the agent's posture without the typed field, which is what the
// posture gate reads (CALIBAN_AUTO_ALLOW=true with allowUnattended false).
// The apiserver refuses each, naming the entry and the field to set, with
// or without an agentPolicy.
func TestSchemaRefusesTheAgentPolicyVariablesInEnv(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	i := 0
	for name, field := range agentPolicyVariables {
		for setting, policy := range map[string]any{
			"no agentPolicy":                 nil,
			"an agentPolicy that allows all": map[string]any{"allowUnattended": true},
		} {
			i++
			t.Run(name+" is refused with "+setting, func(t *testing.T) {
				ws := validWorkspace()
				set(ws, fmt.Sprintf("ws-%d", i), "metadata", "name")
				set(ws, []any{map[string]any{"name": "MODE", "value": "fast"}, map[string]any{"name": name, "value": "true"}}, "spec", "env")
				if policy != nil {
					set(ws, policy, "spec", "agentPolicy")
				}
				u := &unstructured.Unstructured{Object: ws}
				_, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
				if err := framework.IsInvalid(err, "spec.env[1]", "Forbidden",
					name+" is projected from "+field+" and cannot be set in a Workspace; set that field instead"); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// An edit is a side door too: adding the entry to a stored Workspace is
// refused like creating it, while the same name in another case, an
// ordinary variable, is accepted.
func TestSchemaRefusesAnEditAddingAnAgentPolicyVariableToEnv(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	u := &unstructured.Unstructured{Object: validWorkspace()}
	client := cluster.Dynamic.Resource(gvr(u)).Namespace(ns)
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	lower := created.DeepCopy()
	set(lower.Object, []any{map[string]any{"name": "caliban_auto_allow", "value": "true"}}, "spec", "env")
	updated, err := client.Update(ctx, lower, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("an env name differing only in case was refused: %v", err)
	}

	edited := updated.DeepCopy()
	set(edited.Object, []any{
		map[string]any{"name": "caliban_auto_allow", "value": "true"},
		map[string]any{"name": "CALIBAN_AUTO_ALLOW", "value": "true"},
	}, "spec", "env")
	_, err = client.Update(ctx, edited, metav1.UpdateOptions{})
	if err := framework.IsInvalid(err, "spec.env[1]", "Forbidden",
		"CALIBAN_AUTO_ALLOW is projected from agentPolicy.autoAllow and cannot be set in a Workspace; set that field instead"); err != nil {
		t.Error(err)
	}
}
