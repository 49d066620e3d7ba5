// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// The classes of invalid value a schema constraint rejects. A row names the
// class it proves, so the coverage test can tell a field whose minLength is
// exercised from one whose enum is.
const (
	classMinLength = "minLength"
	classMinimum   = "minimum"
	classMaximum   = "maximum"
	classEnum      = "enum"
	classMinItems  = "minItems"
	classRequired  = "required"
	classRule      = "rule"
	classFormat    = "format"
	classMaxLength = "maxLength"
	classPattern   = "pattern"
)

// rejection is one object the apiserver must refuse: obj breaks exactly
// one thing, field is where the apiserver says it broke (indices as sent),
// and message is the schema's own words for it.
type rejection struct {
	obj     map[string]any
	field   string
	class   string
	message string
}

// The apiserver's words for each constraint, as of the pinned
// kube-apiserver.
const (
	msgMinLength = "should be at least 1 chars long"
	msgRequired  = "Required value"
	// The format check names the field only in its text (its path is
	// "<nil>").
	msgInt32 = "must be of type integer with format int32"
	// Names Kubernetes checks later: the apiserver would refuse them in a
	// Pod, or client-go in a request, where nobody reads the answer.
	msgMaxLength253  = "may not be more than 253"
	msgSecretName    = `should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`
	msgEnvName       = `should match '^[ -<>-~]+$'`
	msgRuntimeClass  = "must be a valid RuntimeClass name: a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
	msgConfigMapName = "must be a valid ConfigMap name: a lowercase RFC 1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
)

// tooLongName is one character longer than any Kubernetes object name, and
// otherwise a valid one.
var tooLongName = strings.Repeat("a", 254)

// schemaRejections is every constraint of both CRDs' specs, each broken
// once. TestSchemaRejectionsCoverEveryConstraint keeps it complete.
func schemaRejections() map[string]rejection {
	return map[string]rejection{
		// CalibanTask.
		"an unknown permissionPosture is rejected": {
			obj:   set(validTask(), "yolo", "spec", "task", "permissionPosture"),
			field: "spec.task.permissionPosture", class: classEnum, message: `supported values: "supervised", "unattended"`,
		},
		"an onFinish the operator does not know is rejected": {
			obj:   set(validTask(), "delete", "spec", "lifecycle", "onFinish"),
			field: "spec.lifecycle.onFinish", class: classEnum, message: `supported values: "suspend", "keep"`,
		},
		"a negative ttlSecondsAfterFinished is rejected": {
			obj:   set(validTask(), int64(-1), "spec", "lifecycle", "ttlSecondsAfterFinished"),
			field: "spec.lifecycle.ttlSecondsAfterFinished", class: classMinimum, message: "should be greater than or equal to 0",
		},
		"a ttlSecondsAfterFinished beyond int32 is rejected": {
			obj:   set(validTask(), int64(1)<<31, "spec", "lifecycle", "ttlSecondsAfterFinished"),
			field: "spec.lifecycle.ttlSecondsAfterFinished", class: classFormat, message: msgInt32,
		},
		"an activeDeadlineSeconds of 0 is rejected": {
			obj:   set(validTask(), int64(0), "spec", "lifecycle", "activeDeadlineSeconds"),
			field: "spec.lifecycle.activeDeadlineSeconds", class: classMinimum, message: "should be greater than or equal to 1",
		},
		"an activeDeadlineSeconds beyond int32 is rejected": {
			obj:   set(validTask(), int64(1)<<31, "spec", "lifecycle", "activeDeadlineSeconds"),
			field: "spec.lifecycle.activeDeadlineSeconds", class: classFormat, message: msgInt32,
		},
		"a state.mode typo is rejected": {
			obj:   set(validTask(), "remtoe", "spec", "state", "mode"),
			field: "spec.state.mode", class: classEnum, message: `supported values: "remote", "local"`,
		},
		"an empty task.prompt is rejected": {
			obj:   set(validTask(), "", "spec", "task", "prompt"),
			field: "spec.task.prompt", class: classMinLength, message: msgMinLength,
		},
		"a missing task.prompt is rejected": {
			obj:   set(validTask(), map[string]any{"agentType": "x"}, "spec", "task"),
			field: "spec.task.prompt", class: classRequired, message: msgRequired,
		},
		"a task without a task section is rejected": {
			obj:   without(validTask(), "spec.task"),
			field: "spec.task", class: classRequired, message: msgRequired,
		},
		"a task without a workspaceRef is rejected": {
			obj:   without(validTask(), "spec.workspaceRef"),
			field: "spec.workspaceRef", class: classRequired, message: msgRequired,
		},
		"a workspaceRef without a name is rejected": {
			obj:   set(validTask(), map[string]any{}, "spec", "workspaceRef"),
			field: "spec.workspaceRef.name", class: classRequired, message: msgRequired,
		},
		"an empty workspaceRef.name is rejected": {
			obj:   set(validTask(), "", "spec", "workspaceRef", "name"),
			field: "spec.workspaceRef.name", class: classMinLength, message: msgMinLength,
		},
		"an empty model.name is rejected": {
			obj:   set(validTask(), "", "spec", "model", "name"),
			field: "spec.model.name", class: classMinLength, message: msgMinLength,
		},
		"a blank model.name is rejected": {
			obj:   set(validTask(), "   ", "spec", "model", "name"),
			field: "spec.model.name", class: classRule, message: "model.name must not be blank",
		},
		"a model.name of tabs and newlines is rejected as blank": {
			obj:   set(validTask(), "\t\n \r\n", "spec", "model", "name"),
			field: "spec.model.name", class: classRule, message: "model.name must not be blank",
		},
		"state.mode remote without an endpoint is rejected": {
			obj:   set(validTask(), "remote", "spec", "state", "mode"),
			field: "spec.state", class: classRule, message: "state.mode remote requires state.gonzaloEndpoint",
		},
		"state.mode local with an endpoint is rejected": {
			obj: set(set(validTask(), "local", "spec", "state", "mode"),
				"http://gonzalod:8080", "spec", "state", "gonzaloEndpoint"),
			field: "spec.state", class: classRule, message: "state.gonzaloEndpoint is set, but state.mode local never uses it",
		},
		"state.tokenRef without an endpoint is rejected": {
			obj: set(validTask(), map[string]any{"secretName": "s", "key": "k"},
				"spec", "state", "tokenRef"),
			field: "spec.state", class: classRule, message: "state.tokenRef requires remote storage (set state.gonzaloEndpoint)",
		},
		"a tokenRef without a secretName is rejected": {
			obj:   without(fullTask(), "spec.state.tokenRef.secretName"),
			field: "spec.state.tokenRef.secretName", class: classRequired, message: msgRequired,
		},
		"an empty tokenRef.secretName is rejected": {
			obj:   at(fullTask(), "spec.state.tokenRef.secretName", ""),
			field: "spec.state.tokenRef.secretName", class: classMinLength, message: msgMinLength,
		},
		"a tokenRef without a key is rejected": {
			obj:   without(fullTask(), "spec.state.tokenRef.key"),
			field: "spec.state.tokenRef.key", class: classRequired, message: msgRequired,
		},
		"an empty tokenRef.key is rejected": {
			obj:   at(fullTask(), "spec.state.tokenRef.key", ""),
			field: "spec.state.tokenRef.key", class: classMinLength, message: msgMinLength,
		},

		"a tokenRef.secretName that climbs directories is rejected": {
			obj:   at(fullTask(), "spec.state.tokenRef.secretName", "../../etc/passwd"),
			field: "spec.state.tokenRef.secretName", class: classPattern, message: msgSecretName,
		},
		"a tokenRef.secretName longer than any object name is rejected": {
			obj:   at(fullTask(), "spec.state.tokenRef.secretName", tooLongName),
			field: "spec.state.tokenRef.secretName", class: classMaxLength, message: msgMaxLength253,
		},
		"a routerConfigRef that climbs directories is rejected": {
			obj:   at(fullTask(), "spec.model.routerConfigRef", "../../etc/passwd"),
			field: "spec.model.routerConfigRef", class: classRule, message: msgConfigMapName,
		},
		"a routerConfigRef longer than any object name is rejected": {
			obj:   at(fullTask(), "spec.model.routerConfigRef", tooLongName),
			field: "spec.model.routerConfigRef", class: classMaxLength, message: msgMaxLength253,
		},
		"a task runtimeClass with command substitution is rejected": {
			obj:   at(fullTask(), "spec.isolation.runtimeClass", "$(touch pwned)"),
			field: "spec.isolation.runtimeClass", class: classRule, message: msgRuntimeClass,
		},
		"a task runtimeClass longer than any object name is rejected": {
			obj:   at(fullTask(), "spec.isolation.runtimeClass", tooLongName),
			field: "spec.isolation.runtimeClass", class: classMaxLength, message: msgMaxLength253,
		},

		// Workspace.
		"a credentials secretName with '/' is rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].credentialsRef.secretName", "team/key"),
			field: "spec.providers[0].credentialsRef.secretName", class: classPattern, message: msgSecretName,
		},
		"a source credentials secretName with upper case is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].credentialsRef.secretName", "Git_Creds"),
			field: "spec.sources[0].credentialsRef.secretName", class: classPattern, message: msgSecretName,
		},
		"a source credentials secretName longer than any object name is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].credentialsRef.secretName", tooLongName),
			field: "spec.sources[0].credentialsRef.secretName", class: classMaxLength, message: msgMaxLength253,
		},
		"a credentials secretName longer than any object name is rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].credentialsRef.secretName", tooLongName),
			field: "spec.providers[0].credentialsRef.secretName", class: classMaxLength, message: msgMaxLength253,
		},
		"an env name with '=' is rejected": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "A=B"),
			field: "spec.env[0].name", class: classPattern, message: msgEnvName,
		},
		"an env name with a newline is rejected": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "A\nB"),
			field: "spec.env[0].name", class: classPattern, message: msgEnvName,
		},
		"an env entry naming a variable caliband sets for its workers is rejected, naming it": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "CALIBAN_CONTROL_TOKEN"),
			field: "spec.env[0]", class: classRule, message: "CALIBAN_CONTROL_TOKEN is set by caliband for the workers it spawns and cannot be set in a Workspace",
		},
		"an env entry naming a variable the agent policy projects is rejected, naming it and its field": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "CALIBAN_AUTO_ALLOW"),
			field: "spec.env[0]", class: classRule, message: "CALIBAN_AUTO_ALLOW is projected from agentPolicy.autoAllow and cannot be set in a Workspace; set that field instead",
		},
		"an env entry naming a variable the operator sets is rejected, naming it": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "CALIBAN_DAEMON_TOKEN"),
			field: "spec.env[0]", class: classRule, message: "CALIBAN_DAEMON_TOKEN is set by the operator itself and cannot be set in a Workspace",
		},
		"an env entry naming a variable that loads code is rejected, naming its name": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "NODE_OPTIONS"),
			field: "spec.env[0].name", class: classRule, message: "NODE_OPTIONS decides what code the agent pod loads or runs, and cannot be set in a Workspace",
		},
		"an env entry of a family of variables that load code is rejected, naming its name": {
			obj:   at(fullWorkspace(), "spec.env[0].name", "LD_PRELOAD"),
			field: "spec.env[0].name", class: classRule, message: "LD_PRELOAD decides what code the agent pod loads or runs, and cannot be set in a Workspace",
		},
		"a workspace runtimeClass in upper case is rejected": {
			obj:   at(fullWorkspace(), "spec.isolation.runtimeClass", "gVisor"),
			field: "spec.isolation.runtimeClass", class: classRule, message: msgRuntimeClass,
		},
		"a workspace runtimeClass longer than any object name is rejected": {
			obj:   at(fullWorkspace(), "spec.isolation.runtimeClass", tooLongName),
			field: "spec.isolation.runtimeClass", class: classMaxLength, message: msgMaxLength253,
		},
		"a negative warm pool is rejected": {
			obj:   at(fullWorkspace(), "spec.warmPool.replicas", int64(-1)),
			field: "spec.warmPool.replicas", class: classMinimum, message: "should be greater than or equal to 0",
		},
		"a warm pool over 1000 is rejected": {
			obj:   at(fullWorkspace(), "spec.warmPool.replicas", int64(1001)),
			field: "spec.warmPool.replicas", class: classMaximum, message: "should be less than or equal to 1000",
		},
		"a warm pool size beyond int32 is rejected": {
			obj:   at(fullWorkspace(), "spec.warmPool.replicas", int64(1)<<31),
			field: "spec.warmPool.replicas", class: classFormat, message: msgInt32,
		},
		"parallelToolLimit 0 is rejected": {
			obj:   set(validWorkspace(), int64(0), "spec", "agentPolicy", "parallelToolLimit"),
			field: "spec.agentPolicy.parallelToolLimit", class: classMinimum, message: "should be greater than or equal to 1",
		},
		"a negative parallelToolLimit is rejected": {
			obj:   set(validWorkspace(), int64(-2147483648), "spec", "agentPolicy", "parallelToolLimit"),
			field: "spec.agentPolicy.parallelToolLimit", class: classMinimum, message: "should be greater than or equal to 1",
		},
		// The Go field is an int32: a larger number stored would be a
		// Workspace the operator's informer could not decode.
		"a parallelToolLimit beyond int32 is rejected": {
			obj:   set(validWorkspace(), int64(1)<<31, "spec", "agentPolicy", "parallelToolLimit"),
			field: "spec.agentPolicy.parallelToolLimit", class: classFormat, message: msgInt32,
		},
		"an unknown permissionMode is rejected": {
			obj:   set(validWorkspace(), "yolo", "spec", "agentPolicy", "permissionMode"),
			field: "spec.agentPolicy.permissionMode", class: classEnum, message: `"dontAsk", "bypassPermissions"`,
		},
		"a permissionMode in the wrong case is rejected": {
			obj:   set(validWorkspace(), "DontAsk", "spec", "agentPolicy", "permissionMode"),
			field: "spec.agentPolicy.permissionMode", class: classEnum, message: `Unsupported value: "DontAsk"`,
		},
		"a workspace without providers is rejected": {
			obj:   set(validWorkspace(), []any{}, "spec", "providers"),
			field: "spec.providers", class: classMinItems, message: "should have at least 1 items",
		},
		"a workspace with no providers field is rejected": {
			obj:   without(validWorkspace(), "spec.providers"),
			field: "spec.providers", class: classRequired, message: msgRequired,
		},
		"an empty displayName is rejected": {
			obj:   set(validWorkspace(), "", "spec", "displayName"),
			field: "spec.displayName", class: classMinLength, message: msgMinLength,
		},
		"a workspace without a displayName is rejected": {
			obj:   without(validWorkspace(), "spec.displayName"),
			field: "spec.displayName", class: classRequired, message: msgRequired,
		},
		"an egress port outside 1-65535 is rejected": {
			obj: set(validWorkspace(), map[string]any{"allow": []any{
				map[string]any{"cidr": "10.0.0.0/8", "ports": []any{int64(70000)}}}}, "spec", "egress"),
			field: "spec.egress.allow[0].ports[0]", class: classMaximum, message: "should be less than or equal to 65535",
		},
		"egress port 0 is rejected": {
			obj:   at(fullWorkspace(), "spec.egress.allow[0].ports[0]", int64(0)),
			field: "spec.egress.allow[0].ports[0]", class: classMinimum, message: "should be greater than or equal to 1",
		},
		"an egress port beyond int32 is rejected": {
			obj:   at(fullWorkspace(), "spec.egress.allow[0].ports[0]", int64(1)<<40),
			field: "spec.egress.allow[0].ports[0]", class: classFormat, message: msgInt32,
		},
		"an egress rule without a cidr is rejected": {
			obj:   without(fullWorkspace(), "spec.egress.allow[0].cidr"),
			field: "spec.egress.allow[0].cidr", class: classRequired, message: msgRequired,
		},
		"an empty egress cidr is rejected": {
			obj:   at(fullWorkspace(), "spec.egress.allow[0].cidr", ""),
			field: "spec.egress.allow[0].cidr", class: classMinLength, message: msgMinLength,
		},
		"a source without a path is rejected": {
			obj: set(validWorkspace(), []any{map[string]any{"name": "s", "repo": "r"}},
				"spec", "sources"),
			field: "spec.sources[0].path", class: classRequired, message: msgRequired,
		},
		"an empty source path is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].path", ""),
			field: "spec.sources[0].path", class: classMinLength, message: msgMinLength,
		},
		"a source without a name is rejected": {
			obj:   without(fullWorkspace(), "spec.sources[0].name"),
			field: "spec.sources[0].name", class: classRequired, message: msgRequired,
		},
		"an empty source name is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].name", ""),
			field: "spec.sources[0].name", class: classMinLength, message: msgMinLength,
		},
		"a source without a repo is rejected": {
			obj:   without(fullWorkspace(), "spec.sources[0].repo"),
			field: "spec.sources[0].repo", class: classRequired, message: msgRequired,
		},
		"a source credentialsRef without a secretName is rejected": {
			obj:   without(fullWorkspace(), "spec.sources[0].credentialsRef.secretName"),
			field: "spec.sources[0].credentialsRef.secretName", class: classRequired, message: msgRequired,
		},
		"an empty source credentials secretName is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].credentialsRef.secretName", ""),
			field: "spec.sources[0].credentialsRef.secretName", class: classMinLength, message: msgMinLength,
		},
		"an empty source repo is rejected": {
			obj:   at(fullWorkspace(), "spec.sources[0].repo", ""),
			field: "spec.sources[0].repo", class: classMinLength, message: msgMinLength,
		},
		"a provider without a name is rejected": {
			obj:   without(fullWorkspace(), "spec.providers[0].name"),
			field: "spec.providers[0].name", class: classRequired, message: msgRequired,
		},
		"an empty provider name is rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].name", ""),
			field: "spec.providers[0].name", class: classMinLength, message: msgMinLength,
		},
		"a provider without a kind is rejected": {
			obj:   without(fullWorkspace(), "spec.providers[0].kind"),
			field: "spec.providers[0].kind", class: classRequired, message: msgRequired,
		},
		"an empty provider kind is rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].kind", ""),
			field: "spec.providers[0].kind", class: classMinLength, message: msgMinLength,
		},
		"credentials without a secretName are rejected": {
			obj:   without(fullWorkspace(), "spec.providers[0].credentialsRef.secretName"),
			field: "spec.providers[0].credentialsRef.secretName", class: classRequired, message: msgRequired,
		},
		"credentials with an empty secretName are rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].credentialsRef.secretName", ""),
			field: "spec.providers[0].credentialsRef.secretName", class: classMinLength, message: msgMinLength,
		},
		"credentials without a key are rejected": {
			obj:   without(fullWorkspace(), "spec.providers[0].credentialsRef.key"),
			field: "spec.providers[0].credentialsRef.key", class: classRequired, message: msgRequired,
		},
		"credentials with an empty key are rejected": {
			obj:   at(fullWorkspace(), "spec.providers[0].credentialsRef.key", ""),
			field: "spec.providers[0].credentialsRef.key", class: classMinLength, message: msgMinLength,
		},
		"an env entry without a name is rejected": {
			obj:   without(fullWorkspace(), "spec.env[0].name"),
			field: "spec.env[0].name", class: classRequired, message: msgRequired,
		},
		"an env entry with an empty name is rejected": {
			obj:   at(fullWorkspace(), "spec.env[0].name", ""),
			field: "spec.env[0].name", class: classMinLength, message: msgMinLength,
		},
	}
}

// fullTask and fullWorkspace set every spec field, with one element in
// every list, so that any field path can be broken in place.
func fullTask() map[string]any {
	return map[string]any{
		"apiVersion": "caliban.caliban-ai.dev/v1alpha1",
		"kind":       "CalibanTask",
		"metadata":   map[string]any{"name": "full-task"},
		"spec": map[string]any{
			"workspaceRef": map[string]any{"name": "ws"},
			"providerRef":  "p",
			"task": map[string]any{
				"prompt": "do the thing", "agentType": "coder", "interactive": true, "permissionPosture": "supervised",
			},
			"model": map[string]any{"name": "claude-sonnet-4-5", "routerConfigRef": "router"},
			"state": map[string]any{
				"gonzaloEndpoint": "http://gonzalod:8080", "mode": "remote",
				"tokenRef": map[string]any{"secretName": "gz", "key": "token"},
			},
			"isolation": map[string]any{"runtimeClass": "gvisor", "worktrees": "per-agent"},
			"resources": map[string]any{"class": "small"},
			"lifecycle": map[string]any{"idleTimeout": "1h", "onDelete": "checkpoint"},
			"tools":     []any{"Read"},
		},
	}
}

func fullWorkspace() map[string]any {
	return map[string]any{
		"apiVersion": "caliban.caliban-ai.dev/v1alpha1",
		"kind":       "Workspace",
		"metadata":   map[string]any{"name": "full-ws"},
		"spec": map[string]any{
			"displayName": "ws",
			"sources": []any{map[string]any{
				"name": "s", "repo": "https://example.com/r.git", "ref": "main", "path": "/work/r",
				"credentialsRef": map[string]any{"secretName": "git-creds"},
			}},
			"providers": []any{map[string]any{
				"name": "p", "kind": "anthropic", "baseUrl": "https://api.example.com", "model": "claude-sonnet-4-5",
				"credentialsRef": map[string]any{"secretName": "key", "key": "api-key"},
			}},
			"defaultProvider": "p",
			"env":             []any{map[string]any{"name": "FOO", "value": "bar"}},
			"isolation":       map[string]any{"runtimeClass": "gvisor", "worktrees": "per-agent"},
			"egress": map[string]any{"allow": []any{
				map[string]any{"cidr": "10.0.0.0/8", "ports": []any{int64(443)}},
			}},
			"agentPolicy": map[string]any{
				"allowUnattended": true, "permissionMode": "default",
				"autoAllow": false, "noPermissions": false, "noMcp": false, "noHooks": false,
				"noSkills": false, "noSubAgent": false, "strictKnownMarketplaces": false,
				"enabledPlugins": []any{"a"}, "blockedMarketplaces": []any{"https://m.example.com"},
				"parallelToolLimit": int64(4),
			},
			"warmPool": map[string]any{"replicas": int64(2)},
		},
	}
}

var pathStep = regexp.MustCompile(`^([A-Za-z]+)((?:\[\d+\])*)$`)

// at sets the value at a field path as the apiserver spells it
// ("spec.sources[0].ref") in obj, whose every map and list on the way must
// exist already, and returns obj.
func at(obj map[string]any, path string, value any) map[string]any {
	parent, last := walk(obj, path)
	switch p := parent.(type) {
	case map[string]any:
		p[last.(string)] = value
	case []any:
		p[last.(int)] = value
	}
	return obj
}

// without removes the field at path, a key of an object, and returns obj.
func without(obj map[string]any, path string) map[string]any {
	parent, last := walk(obj, path)
	delete(parent.(map[string]any), last.(string))
	return obj
}

// walk returns the map or list holding the last step of path, and that
// step: a key or an index. It panics on a path the fixture does not have,
// which is a broken test, not a finding.
func walk(obj map[string]any, path string) (any, any) {
	var steps []any
	for _, part := range strings.Split(path, ".") {
		m := pathStep.FindStringSubmatch(part)
		if m == nil {
			panic(fmt.Sprintf("bad path step %q in %s", part, path))
		}
		steps = append(steps, m[1])
		for _, idx := range regexp.MustCompile(`\d+`).FindAllString(m[2], -1) {
			i, _ := strconv.Atoi(idx)
			steps = append(steps, i)
		}
	}
	var cur any = obj
	for _, step := range steps[:len(steps)-1] {
		switch s := step.(type) {
		case string:
			cur = cur.(map[string]any)[s]
		case int:
			cur = cur.([]any)[s]
		}
		if cur == nil {
			panic(fmt.Sprintf("the fixture has nothing at %v of %s", step, path))
		}
	}
	return cur, steps[len(steps)-1]
}

// Without this, a wrong-type row could be rejected for something else the
// full fixture got wrong, and still find its own field in the error.
func TestTheFullyPopulatedFixturesAreAccepted(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	for _, obj := range []map[string]any{fullTask(), fullWorkspace()} {
		u := &unstructured.Unstructured{Object: obj}
		if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s rejected: %v", u.GetKind(), err)
		}
	}
}

// The name rules must not refuse a name Kubernetes takes: the empty
// optional names (unset), dots, and env names with spaces and shell
// characters, which a Pod accepts.
func TestSchemaAcceptsNamesKubernetesAccepts(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	tests := map[string]map[string]any{
		"an empty task runtimeClass and routerConfigRef": at(at(fullTask(), "spec.isolation.runtimeClass", ""), "spec.model.routerConfigRef", ""),
		"dotted names of 253 characters": at(at(at(fullTask(), "spec.isolation.runtimeClass", strings.Repeat("a.", 126)+"a"),
			"spec.model.routerConfigRef", "router.v2"), "spec.state.tokenRef.secretName", strings.Repeat("b", 253)),
		"an empty workspace runtimeClass":             at(fullWorkspace(), "spec.isolation.runtimeClass", ""),
		"an env name with spaces, dots and a command": at(fullWorkspace(), "spec.env[0].name", "my.var $(x) `y`; -z ~"),
		"a dotted credentials secretName":             at(fullWorkspace(), "spec.providers[0].credentialsRef.secretName", "team.anthropic-key"),
		"a dotted source credentials secretName":      at(fullWorkspace(), "spec.sources[0].credentialsRef.secretName", "team.git-creds"),
	}
	i := 0
	for name, obj := range tests {
		i++
		set(obj, fmt.Sprintf("names-%d", i), "metadata", "name")
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: obj}
			if _, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
}

// wrongTypeValues is a value of another type for each JSON schema type, and
// how a row name says it.
var wrongTypeValues = map[string]struct {
	value any
	says  string
}{
	"string":  {value: int64(7), says: "a number"},
	"integer": {value: "7", says: "a string"},
	"boolean": {value: "true", says: "the string \"true\""},
	"array":   {value: "a", says: "a string"},
	"object":  {value: []any{"a"}, says: "a list"},
}

// Every field of both specs, found by walking the CRDs, gets a value of
// the wrong type; a field added later is covered without a new row.
func TestSchemaRejectsAValueOfTheWrongTypeInEveryField(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	fixtures := map[string]func() map[string]any{"CalibanTask": fullTask, "Workspace": fullWorkspace}
	for kind, fixture := range fixtures {
		fields, err := framework.SpecFields(cluster.Root, kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			wrong, ok := wrongTypeValues[f.Schema.Type]
			if !ok {
				t.Errorf("%s %s: no wrong value for type %q; add one", kind, f.Path, f.Schema.Type)
				continue
			}
			path := strings.ReplaceAll(f.Path, "[*]", "[0]")
			name := fmt.Sprintf("%s where the %s %s belongs is rejected", wrong.says, f.Schema.Type, path)
			t.Run(kind+": "+name, func(t *testing.T) {
				u := &unstructured.Unstructured{Object: at(fixture(), path, wrong.value)}
				_, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
				if err := framework.IsInvalid(err, path, "must be of type "+f.Schema.Type); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// constraintClasses are the schema keywords that make a value of the right
// type invalid, and the class of row that proves each. A keyword missing
// here fails the coverage test, so a new kind of marker gets rows too.
var constraintClasses = map[string]string{
	"minLength":                classMinLength,
	"maxLength":                classMaxLength,
	"pattern":                  classPattern,
	"minimum":                  classMinimum,
	"maximum":                  classMaximum,
	"enum":                     classEnum,
	"minItems":                 classMinItems,
	"maxItems":                 "maxItems",
	"x-kubernetes-validations": classRule,
	"format":                   classFormat,
}

// notConstraints are schema keywords that refuse no value of the right
// type (wrong types are TestSchemaRejectsAValueOfTheWrongTypeInEveryField's).
var notConstraints = []string{
	"type", "description", "default", "x-kubernetes-list-type",
	// An object's required list is checked at each child it names.
	"required",
}

// Every constraint the CRDs declare under spec (each minLength, bound,
// enum, minItems, required field and CEL rule) has a row in
// schemaRejections that breaks it.
func TestSchemaRejectionsCoverEveryConstraint(t *testing.T) {
	covered := map[string]bool{}
	// The messages rows saw for rules, by path: a rule whose message is an
	// expression is covered by a row whose message has its words.
	ruleMessages := map[string][]string{}
	for name, r := range schemaRejections() {
		if !strings.HasPrefix(r.field, "spec.") || r.class == "" {
			t.Errorf("row %q: field %q class %q", name, r.field, r.class)
		}
		key := normalize(r.field) + " " + r.class
		covered[key] = true
		if r.class == classRule {
			covered[normalize(r.field)+" rule: "+r.message] = true
			ruleMessages[normalize(r.field)] = append(ruleMessages[normalize(r.field)], r.message)
		}
	}
	var missing []string
	for _, kind := range []string{"CalibanTask", "Workspace"} {
		fields, err := framework.SpecFields(cluster.Root, kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			var need []string
			if f.Required {
				need = append(need, f.Path+" "+classRequired)
			}
			raw, err := json.Marshal(f.Schema)
			if err != nil {
				t.Fatal(err)
			}
			var keywords map[string]any
			if err := json.Unmarshal(raw, &keywords); err != nil {
				t.Fatal(err)
			}
			for kw := range keywords {
				if slices.Contains(notConstraints, kw) {
					continue
				}
				class, ok := constraintClasses[kw]
				if !ok {
					t.Errorf("%s %s: schema keyword %q is neither a known constraint nor known to accept every value", kind, f.Path, kw)
					continue
				}
				need = append(need, f.Path+" "+class)
			}
			for _, rule := range f.Schema.XValidations {
				// A rule with a fieldPath reports at that field.
				path := f.Path + normalize(rule.FieldPath)
				if rule.MessageExpression != "" && slices.ContainsFunc(ruleMessages[path], func(m string) bool {
					return strings.Contains(m, longestLiteral(rule.MessageExpression))
				}) {
					continue
				}
				need = append(need, path+" rule: "+rule.Message+rule.MessageExpression)
			}
			for _, n := range need {
				if !covered[n] {
					missing = append(missing, kind+" "+n)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("constraints no row of schemaRejections breaks:\n%s", strings.Join(missing, "\n"))
	}
}

var index = regexp.MustCompile(`\[\d+\]`)

var celString = regexp.MustCompile(`'([^']*)'`)

// longestLiteral is the longest string literal of a CEL expression: the
// fixed words of a message expression.
func longestLiteral(expr string) string {
	longest := ""
	for _, m := range celString.FindAllStringSubmatch(expr, -1) {
		if len(m[1]) > len(longest) {
			longest = m[1]
		}
	}
	return longest
}

func normalize(path string) string { return index.ReplaceAllString(path, "[*]") }
