// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	goldenfile "github.com/caliban-ai/caliban-operator/test/golden"
)

// The golden files are the whole apply bodies of a task's three children
// (Sandbox, NetworkPolicy, ServiceAccount) for representative inputs, so a
// reviewer sees every change to what reaches the cluster. The tables in the
// other files say which rule each field follows; these files say that nothing
// else changed. Regenerate with UPDATE_GOLDEN=1 and review the diff against
// docs/crd-reference.md#the-sandbox-and-the-agent-pod and
// docs/crd-reference.md#networkpolicy before committing it.

// renderChildren is what the operator applies for a task, as YAML documents.
func renderChildren(t *testing.T, tk *calibanv1alpha1.CalibanTask, p *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) []byte {
	t.Helper()
	var out bytes.Buffer
	for i, obj := range []any{BuildSandbox(tk, p, s), BuildNetworkPolicy(tk, p, s), BuildServiceAccount(tk)} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes()
}

func TestGoldenChildren(t *testing.T) {
	tests := map[string]struct {
		task     *calibanv1alpha1.CalibanTask
		pin      *calibanv1alpha1.ResolvedWorkspace
		settings config.AgentSettings
	}{
		"default-minimal": {
			task:     task("refactor-auth"),
			pin:      pin(pinSources(srcCaliban)),
			settings: settings(),
		},
		"every-feature": {
			task:     everyFeatureTask("refactor-auth"),
			pin:      everyFeaturePin(),
			settings: settings(),
		},
		"no-sources": {
			task:     task("refactor-auth"),
			pin:      pin(),
			settings: settings(),
		},
		"dns-only-egress": {
			task:     task("refactor-auth"),
			pin:      pin(pinSources(srcCaliban), pinEgress()),
			settings: settings(),
		},
		"ingress-narrowed": {
			task: task("refactor-auth"),
			pin:  pin(pinSources(srcCaliban)),
			settings: parsedSettings(t, map[string]string{
				"CALIBAN_INGRESS_NAMESPACE":    "prospero",
				"CALIBAN_INGRESS_POD_SELECTOR": "app.kubernetes.io/name=prospero,app.kubernetes.io/component=control-plane",
			}),
		},
		"dns-elsewhere": {
			task: task("refactor-auth"),
			pin:  pin(pinSources(srcCaliban), pinEgress()),
			settings: parsedSettings(t, map[string]string{
				"CALIBAN_DNS_NAMESPACE":    "dns-system",
				"CALIBAN_DNS_POD_SELECTOR": "",
			}),
		},
		"egress-around-link-local": {
			task: task("refactor-auth"),
			pin: pin(pinSources(srcCaliban), pinEgress(
				calibanv1alpha1.EgressRule{CIDR: "0.0.0.0/0", Ports: []int32{443}},
				calibanv1alpha1.EgressRule{CIDR: "::/0", Ports: []int32{443}},
				calibanv1alpha1.EgressRule{CIDR: "169.254.169.254/32"},
			)),
			settings: settings(),
		},
		"private-sources": {
			task:     task("refactor-auth"),
			pin:      privateSourcesPin(),
			settings: settings(),
		},
		"safe-name": {
			task:     task(longDottedName),
			pin:      pin(pinSources(srcCaliban)),
			settings: settings(),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			golden(t, name+".yaml", renderChildren(t, test.task, test.pin, test.settings))
		})
	}
}

// golden is the repository's golden-file comparison.
var golden = goldenfile.Compare
