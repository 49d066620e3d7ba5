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

// loaderVariables is docs/security.md's list of the variables that make
// the agent pod load or run code, written out rather than taken from the
// operator's list, with a name each prefix catches: a name left out of
// both the list and the schema rule still fails here.
var loaderVariables = []string{
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
	"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CALIBAN_OTEL_HEADERS_HELPER",
	"PATH", "SHELL", "BASH_ENV", "ENV", "ZDOTDIR", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "BASH_FUNC_ls%%",
	"EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "SSH_ASKPASS",
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE", "npm_config_node_options", "NPM_CONFIG_SCRIPT_SHELL",
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
	"PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "RUBYLIB", "RUBYOPT",
	"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH",
	"GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_CONFIG_PARAMETERS",
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
	"GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL", "GIT_DIR", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES",
}

// A Workspace env entry such as LD_PRELOAD or NODE_OPTIONS runs code of
// its writer's choosing in caliband or in every program an agent starts,
// before anybody approved anything. The apiserver refuses each, naming the
// entry's name; variables that only look alike, and those that re-point
// requests (which the admission component gates), are stored.
func TestSchemaRefusesTheLoaderVariablesInEnv(t *testing.T) {
	ns := cluster.Namespace(t, nil)
	create := func(name string, env ...any) error {
		ws := validWorkspace()
		set(ws, name, "metadata", "name")
		set(ws, env, "spec", "env")
		u := &unstructured.Unstructured{Object: ws}
		_, err := cluster.Dynamic.Resource(gvr(u)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	}
	for i, name := range loaderVariables {
		t.Run(name+" is refused", func(t *testing.T) {
			err := create(fmt.Sprintf("ws-%d", i), map[string]any{"name": "MODE", "value": "fast"}, map[string]any{"name": name, "value": "/work/app/x"})
			if err := framework.IsInvalid(err, "spec.env[1].name", "Forbidden",
				name+" decides what code the agent pod loads or runs, and cannot be set in a Workspace"); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("look-alikes and re-pointing variables are stored", func(t *testing.T) {
		var env []any
		for _, name := range []string{"ld_preload", "GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL", "PYTHONUNBUFFERED", "NODE_ENV", "XDG_CACHE_HOME",
			"HTTPS_PROXY", "no_proxy", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "OPENAI_API_BASE"} {
			env = append(env, map[string]any{"name": name, "value": "x"})
		}
		if err := create("look-alikes", env...); err != nil {
			t.Errorf("a Workspace with look-alikes and re-pointing variables was refused: %v", err)
		}
	})
}

// Adding such an entry to a stored Workspace is refused like creating it.
func TestSchemaRefusesAnEditAddingALoaderVariableToEnv(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, nil)
	u := &unstructured.Unstructured{Object: validWorkspace()}
	set(u.Object, []any{map[string]any{"name": "MODE", "value": "fast"}}, "spec", "env")
	client := cluster.Dynamic.Resource(gvr(u)).Namespace(ns)
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edited := created.DeepCopy()
	set(edited.Object, []any{
		map[string]any{"name": "MODE", "value": "fast"},
		map[string]any{"name": "NODE_OPTIONS", "value": "--require /work/app/hook.js"},
	}, "spec", "env")
	_, err = client.Update(ctx, edited, metav1.UpdateOptions{})
	if err := framework.IsInvalid(err, "spec.env[1].name", "Forbidden",
		"NODE_OPTIONS decides what code the agent pod loads or runs, and cannot be set in a Workspace"); err != nil {
		t.Error(err)
	}
}
