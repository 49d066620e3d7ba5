// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// Injection-shaped values: what a shell, git's option parser or a path
// join would read as something other than data.
const (
	cmdSubst    = "$(touch pwned-subst)"
	backticks   = "`touch pwned-backticks`"
	semicolon   = "; touch pwned-semicolon"
	quoteBreak  = "main'; touch pwned-quote; echo '"
	climbing    = "../../etc/passwd"
	uploadPack  = "--upload-pack=touch /tmp/pwned"
	newlined    = "first\ntouch pwned-newline"
	unicodeText = "ünïcødé-リポジトリ-\u202e-😀"
)

// long is a value far longer than any name: the schema sets no maxLength,
// so only the apiserver's request limit bounds it.
var long = strings.Repeat("x", 32*1024)

// Names Kubernetes would refuse later (a Secret, ConfigMap or RuntimeClass
// name, an env name with '=') are refused by the schema now, so no row can
// store one; test/integration/api has those rows. The operator's own
// checks for objects stored before those rules (ValidateWorkspace,
// StateProblem) cannot be reached through the apiserver, so their unit
// tests in pkg/builders are the proof. Egress CIDRs a NetworkPolicy
// refuses have no schema rule and are rows here.

// badInput is one value the schema accepts. Exactly one outcome is set:
// the workspace turns Failed naming the field, the task turns Failed
// naming it, or the value reaches the Sandbox only as inert data.
type badInput struct {
	// fields are the spec fields the row puts the value in, as "<Kind>
	// <path>" with "[*]" for list indices.
	fields    []string
	workspace func(*calibanv1alpha1.WorkspaceSpec)
	task      func(*calibanv1alpha1.CalibanTaskSpec)

	workspaceFailed []string
	taskFailed      *taskFailure
	rendered        func(t *testing.T, sb *sandboxv1beta1.Sandbox, task *calibanv1alpha1.CalibanTask)
}

type taskFailure struct {
	reason string
	words  []string
}

// tokenSecret exists with a key other than the one a row asks for.
const tokenSecret = "gonzalo-token"

func badInputs() map[string]badInput {
	withSource := func(ref, repo, path string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Sources = []calibanv1alpha1.Source{{Name: "s", Repo: repo, Ref: ref, Path: path}}
		}
	}
	const repo, ref, path = "https://example.com/r.git", "main", "/work/r"
	withEnv := func(name, value string) func(*calibanv1alpha1.WorkspaceSpec) {
		return func(spec *calibanv1alpha1.WorkspaceSpec) {
			spec.Env = append(spec.Env, calibanv1alpha1.EnvVar{Name: name, Value: value})
		}
	}
	withState := func(state calibanv1alpha1.StateSpec) func(*calibanv1alpha1.CalibanTaskSpec) {
		return func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.State = &state }
	}
	return map[string]badInput{
		// Refused by the operator: the Workspace.
		"a source path that climbs out of the workspace root fails the workspace naming sources[0]": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, climbing),
			workspaceFailed: []string{"sources[0] 's'", "path '../../etc/passwd' is not under the workspace root '/work'"},
		},
		"a source path that climbs out through the root fails the workspace naming sources[0]": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "/work/../etc/passwd"),
			workspaceFailed: []string{"sources[0] 's'", "path '/work/../etc/passwd' is not under the workspace root"},
		},
		"a relative source path fails the workspace naming sources[0]": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "work/r"),
			workspaceFailed: []string{"sources[0] 's'", "path 'work/r' is not under the workspace root"},
		},
		"the workspace root itself as a source path fails the workspace naming sources[0]": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "/work/./"),
			workspaceFailed: []string{"sources[0] 's'", "path '/work/./' is not under the workspace root"},
		},
		"two sources cloned into one path fail the workspace naming sources[1]": {
			fields: []string{"Workspace spec.sources[*].path"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Sources = append(spec.Sources, calibanv1alpha1.Source{Name: "again", Repo: repo, Path: "/work/caliban/"})
			},
			workspaceFailed: []string{"sources[1] 'again'", "is also the path of source 'caliban'"},
		},
		"a shell command as an egress cidr fails the workspace naming egress.allow[0]": {
			fields: []string{"Workspace spec.egress.allow[*].cidr"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: cmdSubst}}}
			},
			workspaceFailed: []string{"egress.allow[0]: cidr '" + cmdSubst + "' is not an IPv4 or IPv6 CIDR"},
		},
		"an egress cidr with a zone fails the workspace naming egress.allow[0]": {
			fields: []string{"Workspace spec.egress.allow[*].cidr"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "fe80::1%eth0/64"}}}
			},
			workspaceFailed: []string{"egress.allow[0]: cidr 'fe80::1%eth0/64'"},
		},
		"an egress address without a prefix length fails the workspace naming egress.allow[0]": {
			fields: []string{"Workspace spec.egress.allow[*].cidr"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.1"}}}
			},
			workspaceFailed: []string{"egress.allow[0]: cidr '10.0.0.1'"},
		},
		"an egress cidr with bits set beyond its prefix fails the workspace naming egress.allow[0]": {
			fields: []string{"Workspace spec.egress.allow[*].cidr"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "10.0.0.1/8"}}}
			},
			workspaceFailed: []string{"egress.allow[0]: cidr '10.0.0.1/8' has bits set beyond the prefix length, which a NetworkPolicy refuses; the network is '10.0.0.0/8'"},
		},
		"an IPv4-mapped IPv6 egress cidr fails the workspace naming egress.allow[0]": {
			fields: []string{"Workspace spec.egress.allow[*].cidr"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{{CIDR: "::ffff:10.0.0.0/104"}}}
			},
			workspaceFailed: []string{"egress.allow[0]: cidr '::ffff:10.0.0.0/104' is an IPv4-mapped IPv6 address, which a NetworkPolicy refuses; write it as IPv4 ('10.0.0.0/8')"},
		},
		"two providers of one name fail the workspace naming the provider name": {
			fields: []string{"Workspace spec.providers[*].name"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Providers = append(spec.Providers, calibanv1alpha1.Provider{Name: "planner", Kind: "openai"})
			},
			workspaceFailed: []string{"duplicate provider name 'planner'"},
		},
		"a defaultProvider that is a shell command fails the workspace naming defaultProvider": {
			fields:          []string{"Workspace spec.defaultProvider"},
			workspace:       func(spec *calibanv1alpha1.WorkspaceSpec) { spec.DefaultProvider = semicolon },
			workspaceFailed: []string{"defaultProvider '" + semicolon + "' names no provider"},
		},
		"an env name given twice fails the workspace naming env[1]": {
			fields: []string{"Workspace spec.env[*].name"}, workspace: withEnv("CALIBAN_OUTPUT_STYLE", "verbose"),
			workspaceFailed: []string{"env[1]: duplicate name 'CALIBAN_OUTPUT_STYLE'"},
		},
		"an env name that is the provider's key variable fails the workspace naming env[1]": {
			fields: []string{"Workspace spec.env[*].name"}, workspace: withEnv("ANTHROPIC_API_KEY", "sk-stolen"),
			workspaceFailed: []string{"env[1]: 'ANTHROPIC_API_KEY' is set by the operator itself"},
		},
		"a provider kind spelling an operator variable fails the workspace naming providers[0]": {
			fields:          []string{"Workspace spec.providers[*].kind"},
			workspace:       func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].Kind = " Caliban " },
			workspaceFailed: []string{"providers[0] 'planner': kind ' Caliban ' would set CALIBAN_API_KEY"},
		},
		"credentials in a Secret that does not exist fail the workspace naming the provider and secret": {
			fields: []string{"Workspace spec.providers[*].credentialsRef.secretName"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Providers[0].CredentialsRef.SecretName = "no-such.secret"
			},
			workspaceFailed: []string{"provider 'planner': secret 'no-such.secret' key 'api-key' not found"},
		},
		"source credentials in a Secret that does not exist fail the workspace naming the source and secret": {
			fields: []string{"Workspace spec.sources[*].credentialsRef.secretName"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Sources = []calibanv1alpha1.Source{{Name: "s", Repo: repo, Ref: ref, Path: path,
					CredentialsRef: &calibanv1alpha1.SourceCredentialsRef{SecretName: "no-such.git-secret"}}}
			},
			workspaceFailed: []string{"sources[0] 's': secret 'no-such.git-secret' not found"},
		},
		"credentials under a key that is a shell command fail the workspace naming the provider and key": {
			fields:          []string{"Workspace spec.providers[*].credentialsRef.key"},
			workspace:       func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].CredentialsRef.Key = backticks },
			workspaceFailed: []string{"provider 'planner': secret 'anthropic-key' key '" + backticks + "' not found"},
		},
		"noPermissions with autoAllow fails the workspace naming both": {
			fields: []string{"Workspace spec.agentPolicy.noPermissions", "Workspace spec.agentPolicy.autoAllow"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true, NoPermissions: new(true), AutoAllow: new(true)}
			},
			workspaceFailed: []string{"agentPolicy.noPermissions and agentPolicy.autoAllow cannot both be true"},
		},

		// Refused by the operator: the task.
		"a providerRef in backticks fails the task naming providerRef": {
			fields: []string{"CalibanTask spec.providerRef"},
			task:   func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.ProviderRef = backticks },
			taskFailed: &taskFailure{reason: builders.ReasonWorkspaceUnresolved,
				words: []string{"providerRef '" + backticks + "' names no provider in the workspace"}},
		},
		"a workspaceRef that climbs directories fails the task naming the workspace": {
			fields: []string{"CalibanTask spec.workspaceRef.name"},
			task:   func(spec *calibanv1alpha1.CalibanTaskSpec) { spec.WorkspaceRef.Name = climbing },
			taskFailed: &taskFailure{reason: builders.ReasonWorkspaceUnresolved,
				words: []string{"Workspace not found: '../../etc/passwd'"}},
		},
		"an onDelete with a command in it fails the task naming lifecycle.onDelete": {
			fields: []string{"CalibanTask spec.lifecycle.onDelete"},
			task: func(spec *calibanv1alpha1.CalibanTaskSpec) {
				spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{OnDelete: "delete" + cmdSubst}
			},
			taskFailed: &taskFailure{reason: builders.ReasonInvalidLifecycle,
				words: []string{"lifecycle.onDelete 'delete" + cmdSubst + "' is not one of: delete, checkpoint"}},
		},
		"a token Secret that does not exist fails the task naming state.tokenRef": {
			fields: []string{"CalibanTask spec.state.tokenRef.secretName"},
			task: withState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://gonzalod:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: "no-such.token", Key: "token"}}),
			taskFailed: &taskFailure{reason: builders.ReasonInvalidState,
				words: []string{"state.tokenRef: secret 'no-such.token' not found"}},
		},
		"a token key with a newline fails the task naming state.tokenRef": {
			fields: []string{"CalibanTask spec.state.tokenRef.key"},
			task: withState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://gonzalod:8080",
				TokenRef: &calibanv1alpha1.SecretKeyRef{SecretName: tokenSecret, Key: newlined}}),
			taskFailed: &taskFailure{reason: builders.ReasonInvalidState,
				words: []string{"state.tokenRef: secret '" + tokenSecret + "' has no key '" + newlined + "'"}},
		},

		// Accepted: each value must reach the clone script as one literal
		// argument, which executing the script proves.
		"a ref that is a git option is cloned as a branch name": {
			fields: []string{"Workspace spec.sources[*].ref"}, workspace: withSource(uploadPack, repo, path),
			rendered: clonesExactly(cloneArgv(uploadPack, repo, path)),
		},
		"a ref that breaks out of its quotes is cloned as a branch name": {
			fields: []string{"Workspace spec.sources[*].ref"}, workspace: withSource(quoteBreak, repo, path),
			rendered: clonesExactly(cloneArgv(quoteBreak, repo, path)),
		},
		"a ref of 32 KiB is cloned as one branch name": {
			fields: []string{"Workspace spec.sources[*].ref"}, workspace: withSource(long, repo, path),
			rendered: clonesExactly(cloneArgv(long, repo, path)),
		},
		"a repo with command substitution is cloned as a literal URL": {
			fields: []string{"Workspace spec.sources[*].repo"}, workspace: withSource(ref, cmdSubst, path),
			rendered: clonesExactly(cloneArgv(ref, cmdSubst, path)),
		},
		"a repo that is a git option is cloned as a literal URL": {
			fields: []string{"Workspace spec.sources[*].repo"}, workspace: withSource(ref, uploadPack, path),
			rendered: clonesExactly(cloneArgv(ref, uploadPack, path)),
		},
		"a path with a semicolon is cloned into as one path": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "/work/r"+semicolon),
			rendered: clonesExactly(cloneArgv(ref, repo, "/work/r"+semicolon)),
		},
		"a path with a newline and backticks is cloned into as one path": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "/work/"+newlined+backticks),
			rendered: clonesExactly(cloneArgv(ref, repo, "/work/"+newlined+backticks)),
		},
		"a unicode path is cloned into unchanged": {
			fields: []string{"Workspace spec.sources[*].path"}, workspace: withSource(ref, repo, "/work/"+unicodeText),
			rendered: clonesExactly(cloneArgv(ref, repo, "/work/"+unicodeText)),
		},
		"a source name with command substitution is not rendered": {
			fields: []string{"Workspace spec.sources[*].name"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Sources = []calibanv1alpha1.Source{{Name: cmdSubst, Repo: repo, Path: path}}
			},
			rendered: all(clonesExactly(cloneArgv(ref, repo, path)), notRendered(cmdSubst)),
		},

		// Accepted: values that become environment variables are values,
		// never names or commands.
		"an env value with command substitution, backticks and a newline is one env value": {
			fields: []string{"Workspace spec.env[*].value"}, workspace: withEnv("NOTES", cmdSubst+backticks+newlined),
			rendered: envExactly("NOTES", cmdSubst+backticks+newlined),
		},
		"a provider baseUrl with a newline and a command is one env value": {
			fields:    []string{"Workspace spec.providers[*].baseUrl"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].BaseURL = "https://x\n" + semicolon },
			rendered:  envExactly("ANTHROPIC_BASE_URL", "https://x\n"+semicolon),
		},
		"a provider kind with shell characters is a value, and its variables are identifiers": {
			fields:    []string{"Workspace spec.providers[*].kind"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].Kind = "acme" + cmdSubst },
			rendered:  all(envExactly(builders.EnvProvider, "acme"+cmdSubst), envIsSecret("ACME__TOUCH_PWNED_SUBST__API_KEY")),
		},
		"a gonzaloEndpoint with a command is one env value": {
			fields:   []string{"CalibanTask spec.state.gonzaloEndpoint"},
			task:     withState(calibanv1alpha1.StateSpec{GonzaloEndpoint: "http://gonzalod:8080/" + cmdSubst}),
			rendered: envExactly(builders.EnvStorageRemoteURL, "http://gonzalod:8080/"+cmdSubst),
		},
		"plugin and marketplace entries with shell characters are one env value each list": {
			fields: []string{"Workspace spec.agentPolicy.enabledPlugins[*]", "Workspace spec.agentPolicy.blockedMarketplaces[*]"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.AgentPolicy = &calibanv1alpha1.AgentPolicy{
					EnabledPlugins: []string{cmdSubst, newlined}, BlockedMarketplaces: []string{backticks, long},
				}
			},
			rendered: all(envExactly(builders.EnvEnabledPlugins, cmdSubst+","+newlined),
				envExactly(builders.EnvBlockedMarketplaces, backticks+","+long)),
		},

		// Accepted: references to other objects are passed on as names,
		// and nowhere else. The schema admits only names Kubernetes takes.
		"a dotted routerConfigRef is only a ConfigMap name": {
			fields: []string{"CalibanTask spec.model.routerConfigRef"},
			task: func(spec *calibanv1alpha1.CalibanTaskSpec) {
				spec.Model = &calibanv1alpha1.ModelSpec{RouterConfigRef: "router.v2"}
			},
			rendered: routerConfigMapIs("router.v2"),
		},
		"a dotted task runtimeClass is only a RuntimeClass name": {
			fields: []string{"CalibanTask spec.isolation.runtimeClass"},
			task: func(spec *calibanv1alpha1.CalibanTaskSpec) {
				spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "gvisor.example.com"}
			},
			rendered: runtimeClassIs("gvisor.example.com"),
		},
		"a dotted workspace runtimeClass is only a RuntimeClass name": {
			fields: []string{"Workspace spec.isolation.runtimeClass"},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.Isolation = &calibanv1alpha1.Isolation{RuntimeClass: "kata.example.com"}
			},
			rendered: runtimeClassIs("kata.example.com"),
		},
		// Kubernetes takes any printable ASCII but '=' as an env name.
		"an env name with a command and backticks is only an env name": {
			fields: []string{"Workspace spec.env[*].name"}, workspace: withEnv(cmdSubst+backticks, "inert-value"),
			rendered: envExactly(cmdSubst+backticks, "inert-value"),
		},

		// Accepted: values the operator only carries or pins never reach
		// the Sandbox.
		"carried task values with shell characters are not rendered": {
			fields: []string{
				"CalibanTask spec.task.prompt", "CalibanTask spec.task.agentType", "CalibanTask spec.model.name",
				"CalibanTask spec.isolation.worktrees", "CalibanTask spec.resources.class",
				"CalibanTask spec.lifecycle.idleTimeout", "CalibanTask spec.tools[*]",
			},
			task: func(spec *calibanv1alpha1.CalibanTaskSpec) {
				spec.Task.Prompt = "prompt" + cmdSubst
				spec.Task.AgentType = "agent" + backticks
				spec.Model = &calibanv1alpha1.ModelSpec{Name: "model" + semicolon}
				spec.Isolation = &calibanv1alpha1.Isolation{Worktrees: "worktrees" + cmdSubst}
				spec.Resources = &calibanv1alpha1.ResourcesSpec{Class: "class" + cmdSubst}
				spec.Lifecycle = &calibanv1alpha1.LifecycleSpec{IdleTimeout: "idle" + cmdSubst}
				spec.Tools = []string{"tool" + cmdSubst}
			},
			rendered: all(
				notRendered("prompt"+cmdSubst), notRendered("agent"+backticks), notRendered("model"+semicolon),
				notRendered("worktrees"+cmdSubst), notRendered("class"+cmdSubst), notRendered("idle"+cmdSubst),
				notRendered("tool"+cmdSubst), pinnedModel("model"+semicolon)),
		},
		"carried workspace values with shell characters are not rendered": {
			fields: []string{
				"Workspace spec.displayName", "Workspace spec.providers[*].name", "Workspace spec.providers[*].model",
				"Workspace spec.isolation.worktrees",
			},
			workspace: func(spec *calibanv1alpha1.WorkspaceSpec) {
				spec.DisplayName = "display" + cmdSubst
				spec.Providers[0].Name = "provider" + backticks
				spec.Providers[0].Model = "model" + cmdSubst
				spec.Isolation = &calibanv1alpha1.Isolation{Worktrees: "worktrees" + semicolon}
			},
			rendered: all(notRendered("display"+cmdSubst), notRendered("provider"+backticks),
				notRendered("model"+cmdSubst), notRendered("worktrees"+semicolon), pinnedModel("model"+cmdSubst)),
		},
	}
}

// The schema's enums admit only known values; every other string field of
// either spec must be in some row.
func TestBadInputTableCoversEveryFreeFormField(t *testing.T) {
	touched := map[string]bool{}
	for _, row := range badInputs() {
		for _, f := range row.fields {
			touched[f] = true
		}
	}
	var missing []string
	for _, kind := range []string{"CalibanTask", "Workspace"} {
		fields, err := framework.SpecFields(cluster.Root, kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			if f.Schema.Type != "string" || len(f.Schema.Enum) > 0 {
				continue
			}
			if !touched[kind+" "+f.Path] {
				missing = append(missing, kind+" "+f.Path)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("free-form string fields no bad-input row puts a value in:\n%s", strings.Join(missing, "\n"))
	}
}

func TestBadInputIsRefusedNamingTheFieldOrRenderedInertly(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	op := startOperator(t, "badinput", ns)
	pid := op.Pid()
	createProviderSecret(t, ns)
	createSecret(t, ns, tokenSecret, map[string]string{"token": "gz-test"})

	rows := badInputs()
	names := make([]string, 0, len(rows))
	for name := range rows {
		names = append(names, name)
	}
	sort.Strings(names)

	t.Run("rows", func(t *testing.T) {
		for i, name := range names {
			row := rows[name]
			obj := fmt.Sprintf("bad-%02d", i)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var wsMutate []func(*calibanv1alpha1.WorkspaceSpec)
				if row.workspace != nil {
					wsMutate = append(wsMutate, row.workspace)
				}
				createWorkspace(t, ns, obj, wsMutate...)
				if row.workspaceFailed != nil {
					waitForWorkspace(t, ns, obj, settleTimeout, workspaceFailedNaming(row.workspaceFailed...))
					return
				}
				var taskMutate []func(*calibanv1alpha1.CalibanTaskSpec)
				if row.task != nil {
					taskMutate = append(taskMutate, row.task)
				}
				createTask(t, ns, obj, obj, taskMutate...)
				if f := row.taskFailed; f != nil {
					waitForTask(t, ns, obj, settleTimeout, failedNaming(f.reason, f.words...))
					return
				}
				waitForWorkspace(t, ns, obj, settleTimeout, workspaceReady)
				task := waitForTask(t, ns, obj, settleTimeout, isRunning)
				sb, err := framework.SandboxOf(getSandbox(t, ns, task.Status.SandboxRef.Name))
				if err != nil {
					t.Fatal(err)
				}
				row.rendered(t, sb, task)
			})
		}
	})

	// None of it may cost the operator its process.
	select {
	case <-op.Done():
		t.Fatalf("operator %d exited during the table: %v", pid, op.ProcessState())
	default:
	}
	if code, body, err := op.Get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz after the table: %d %q %v", code, body, err)
	}
	for _, crash := range []string{"panic:", "fatal error:"} {
		if strings.Contains(op.Output(), crash) {
			t.Errorf("the operator's output contains %q", crash)
		}
	}
}

// workspaceFailedNaming: Failed for the current generation, with a message
// (and Ready condition) containing every one of words.
func workspaceFailedNaming(words ...string) func(*calibanv1alpha1.Workspace) error {
	return func(ws *calibanv1alpha1.Workspace) error {
		if ws.Status.Phase != calibanv1alpha1.WorkspaceFailed {
			return fmt.Errorf("phase %q, want Failed", ws.Status.Phase)
		}
		if ws.Status.ObservedGeneration != ws.Generation {
			return fmt.Errorf("observedGeneration %d, want %d", ws.Status.ObservedGeneration, ws.Generation)
		}
		for _, w := range words {
			if !strings.Contains(ws.Status.Message, w) {
				return fmt.Errorf("message %q does not name %q", ws.Status.Message, w)
			}
		}
		return nil
	}
}

type renderCheck = func(t *testing.T, sb *sandboxv1beta1.Sandbox, task *calibanv1alpha1.CalibanTask)

func all(checks ...renderCheck) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, task *calibanv1alpha1.CalibanTask) {
		t.Helper()
		for _, c := range checks {
			c(t, sb, task)
		}
	}
}

func calibandContainer(t *testing.T, sb *sandboxv1beta1.Sandbox) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(sb.Spec.PodTemplate.Spec.Containers, func(c corev1.Container) bool { return c.Name == builders.ContainerCaliband })
	if i < 0 {
		t.Fatalf("Sandbox %s has no caliband container", sb.Name)
	}
	return sb.Spec.PodTemplate.Spec.Containers[i]
}

// envExactly: the caliband container has the variable once, with exactly
// this literal value, and caliband's argv (the only other place a value
// could go) is the operator's own.
func envExactly(name, value string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		c := calibandContainer(t, sb)
		var got []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name == name {
				got = append(got, e)
			}
		}
		if diff := cmp.Diff([]corev1.EnvVar{{Name: name, Value: value}}, got); diff != "" {
			t.Errorf("env %q (-want +got):\n%s", name, diff)
		}
		if len(c.Command) != 0 || slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, value) && value != "" }) {
			t.Errorf("caliband's command %q or args %q carry %q", c.Command, c.Args, value)
		}
	}
}

// envIsSecret: the variable exists only as a secretKeyRef.
func envIsSecret(name string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		for _, e := range calibandContainer(t, sb).Env {
			if e.Name == name {
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("env %s = %+v, want a secretKeyRef only", name, e)
				}
				return
			}
		}
		t.Errorf("no env %s", name)
	}
}

// notRendered: the value appears nowhere in the Sandbox.
func notRendered(value string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		raw, err := json.Marshal(sb)
		if err != nil {
			t.Fatal(err)
		}
		quoted, _ := json.Marshal(value)
		if bytes.Contains(raw, bytes.Trim(quoted, `"`)) {
			t.Errorf("the Sandbox carries %q", value)
		}
	}
}

// pinnedModel: the model was pinned verbatim, as data in the task's status.
func pinnedModel(model string) renderCheck {
	return func(t *testing.T, _ *sandboxv1beta1.Sandbox, task *calibanv1alpha1.CalibanTask) {
		t.Helper()
		if got := task.Status.ResolvedWorkspace.Provider.Model; got != model {
			t.Errorf("pinned model %q, want %q", got, model)
		}
	}
}

func runtimeClassIs(name string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		if got := sb.Spec.PodTemplate.Spec.RuntimeClassName; got == nil || *got != name {
			t.Errorf("runtimeClassName %v, want %q", got, name)
		}
	}
}

func routerConfigMapIs(name string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		var got []string
		for _, v := range sb.Spec.PodTemplate.Spec.Volumes {
			if v.ConfigMap != nil {
				got = append(got, v.ConfigMap.Name)
			}
		}
		if diff := cmp.Diff([]string{name}, got); diff != "" {
			t.Errorf("ConfigMap volumes (-want +got):\n%s", diff)
		}
		c := calibandContainer(t, sb)
		if v, _ := envValue(c.Env, builders.EnvRouterConfig); v != builders.RouterConfigPath {
			t.Errorf("%s = %q, want the operator's fixed %q", builders.EnvRouterConfig, v, builders.RouterConfigPath)
		}
	}
}

// cloneArgv is git's argv for one source when every value stays one
// argument.
func cloneArgv(ref, repo, path string) []string {
	return []string{"clone", "--depth", "1", "--branch", ref, "--", repo, path}
}

// The fake commands of the clone rig: git records its argv as
// NUL-separated fields (a count, then the arguments), and touch records
// that it ran. Nothing else is on PATH; [ is a shell builtin.
const (
	rigGit   = "#!/bin/sh\n{ printf '%s\\0' \"$#\"; for a in \"$@\"; do printf '%s\\0' \"$a\"; done; } >> \"$RIG_LOG\"\n"
	rigTouch = "#!/bin/sh\nprintf 'touch\\0' >> \"$RIG_LOG.touch\"\n"
)

// clonesExactly runs the clone-workspace init container's command as
// rendered, with /bin/sh and a fake git and touch, and checks git ran once
// with exactly argv and nothing else ran.
func clonesExactly(argv []string) renderCheck {
	return func(t *testing.T, sb *sandboxv1beta1.Sandbox, _ *calibanv1alpha1.CalibanTask) {
		t.Helper()
		init := sb.Spec.PodTemplate.Spec.InitContainers
		if len(init) != 1 || init[0].Name != builders.ContainerClone || len(init[0].Command) != 3 ||
			init[0].Command[0] != "/bin/sh" || init[0].Command[1] != "-c" {
			t.Fatalf("init containers %+v, want one clone-workspace running /bin/sh -c", init)
		}
		if len(init[0].Args) != 0 {
			t.Errorf("clone-workspace args %q, want none", init[0].Args)
		}
		dir := t.TempDir()
		bin := filepath.Join(dir, "bin")
		work := filepath.Join(dir, "cwd")
		for _, d := range []string{bin, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, body := range map[string]string{"git": rigGit, "touch": rigTouch} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		log := filepath.Join(dir, "git.log")
		cmd := exec.Command(init[0].Command[0], init[0].Command[1:]...)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + bin, "RIG_LOG=" + log}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("the clone script failed: %v\n%s", err, out)
		}
		if len(out) != 0 {
			t.Errorf("the clone script wrote %q; nothing but git should run, silently", out)
		}
		if _, err := os.Stat(log + ".touch"); err == nil {
			t.Errorf("an injected touch ran")
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatalf("git never ran: %v", err)
		}
		fields := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		var calls [][]string
		for i := 0; i < len(fields); {
			n, err := strconv.Atoi(fields[i])
			if err != nil || i+1+n > len(fields) {
				t.Fatalf("corrupt git log %q", data)
			}
			calls = append(calls, fields[i+1:i+1+n])
			i += 1 + n
		}
		if diff := cmp.Diff([][]string{argv}, calls); diff != "" {
			t.Errorf("git's argv (-want +got):\n%s", diff)
		}
		entries, _ := os.ReadDir(work)
		if len(entries) != 0 {
			t.Errorf("the script left %v in its working directory", entries)
		}
	}
}
