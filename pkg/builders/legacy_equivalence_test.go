package builders

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// TEMPORARY: the apply configuration BuildSandbox returns encodes to the
// document SandboxApplyBody made of the typed rendering, for every task,
// pin and settings the builders' tests use. Deleted with sandbox_apply.go.
func TestTheApplyConfigurationIsTheOldApplyBody(t *testing.T) {
	type input struct {
		task *calibanv1alpha1.CalibanTask
		pin  *calibanv1alpha1.ResolvedWorkspace
	}
	inputs := map[string]input{}
	tasks := map[string]*calibanv1alpha1.CalibanTask{
		"minimal":       task("refactor-auth"),
		"every feature": everyFeatureTask("refactor-auth"),
		"long dotted":   task(longDottedName),
		"safe form":     task("a.b"),
		"uppercase":     task("Refactor.Auth"),
		"router":        task("t", taskRouterConfig("team-router")),
		"model only":    task("t", taskModel("gpt-5")),
		"task runtime":  task("t", taskIsolation(calibanv1alpha1.Isolation{RuntimeClass: "gvisor"})),
		"worktrees":     task("t", taskIsolation(calibanv1alpha1.Isolation{Worktrees: "shared"})),
		"other ns":      task("refactor-auth", func(t *calibanv1alpha1.CalibanTask) { t.Namespace = "other" }),
		"local state":   task("t", taskState(calibanv1alpha1.StateSpec{Mode: StateModeLocal})),
	}
	pins := map[string]*calibanv1alpha1.ResolvedWorkspace{
		"minimal":         pin(),
		"empty sources":   pin(pinSources()),
		"one source":      pin(pinSources(srcCaliban)),
		"two sources":     pin(pinSources(srcCaliban, srcDocs)),
		"private":         privateSourcesPin(),
		"private indexed": pin(pinSources(srcCaliban, srcDocs, srcFileWithCredentials, srcPrivateHTTPS)),
		"every feature":   everyFeaturePin(),
		"dns only":        pin(pinSources(srcCaliban), pinEgress()),
		"pin runtime":     pin(pinIsolation(calibanv1alpha1.Isolation{RuntimeClass: "kata"})),
		"pin worktrees":   pin(pinIsolation(calibanv1alpha1.Isolation{Worktrees: "per-agent"})),
		"no key":          pin(pinProvider(calibanv1alpha1.Provider{Name: "p", Kind: "anthropic"})),
	}
	for tn, tk := range tasks {
		for pn, p := range pins {
			inputs["task "+tn+", pin "+pn] = input{tk, p}
		}
	}
	for name, in := range envInputs() {
		inputs["env: "+name] = input{in.task, in.pin}
	}
	probeTask, probePin := renderingProbe()
	inputs["the fingerprint probe"] = input{probeTask, probePin}

	settingsList := map[string]AgentSettings{
		"default": settings(),
		"custom": settings(func(s *AgentSettings) {
			s.WorkspaceRoot, s.CalibandPort, s.AgentPortBase, s.AgentPortEnd = "/srv/ws", 9443, 20000, 20999
			s.ClusterDomain, s.SessionServerName, s.SessionTLSSecret = "corp.example", "caliband.session.internal", "other-tls"
			s.GitImage, s.CalibandImage = "registry.local/git:2.45", "ghcr.io/caliban-ai/caliban:v2"
			s.AgentUID, s.AgentGID = 2000, 3000
			s.WorkspaceStorage = quantity("250Gi")
			s.SessionTokenSecret, s.SessionTokenKey = "other-token", "t"
		}),
		"limits":              parsedSettings(t, map[string]string{"CALIBAND_CPU_LIMIT": "2", "CALIBAND_MEMORY_LIMIT": "4Gi"}),
		"one request cleared": parsedSettings(t, map[string]string{"CALIBAN_AGENT_SECCOMP_PROFILE": "Unconfined", "CALIBAND_CPU_REQUEST": ""}),
		"resources cleared":   parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": ""}),
		"limits only": parsedSettings(t, map[string]string{"CALIBAND_CPU_REQUEST": "", "CALIBAND_MEMORY_REQUEST": "",
			"CALIBAND_MEMORY_LIMIT": "1Gi"}),
		"ingress narrowed": parsedSettings(t, map[string]string{
			"CALIBAN_INGRESS_NAMESPACE":    "prospero",
			"CALIBAN_INGRESS_POD_SELECTOR": "app.kubernetes.io/name=prospero,app.kubernetes.io/component=control-plane",
		}),
		"zero resources struct": settings(func(s *AgentSettings) { s.CalibandResources = corev1.ResourceRequirements{} }),
	}

	compared := 0
	for name, in := range inputs {
		for sn, s := range settingsList {
			newBody, err := json.Marshal(BuildSandbox(in.task, in.pin, s))
			if err != nil {
				t.Fatal(err)
			}
			oldBody, err := SandboxApplyBody(legacyBuildSandbox(in.task, in.pin, s))
			if err != nil {
				t.Fatal(err)
			}
			var newDoc, oldDoc any
			if err := json.Unmarshal(newBody, &newDoc); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(oldBody, &oldDoc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(oldDoc, newDoc); diff != "" {
				t.Errorf("%s, settings %s: the body changed (-SandboxApplyBody +apply configuration):\n%s", name, sn, diff)
			}
			compared++

			// The kept Sandbox of overLive: the rendering's metadata over the
			// live spec (here: the typed rendering, as a GET would decode it).
			live := legacyBuildSandbox(in.task, in.pin, s)
			live.Status.ServiceFQDN = "x.svc"
			kept := legacyBuildSandbox(in.task, in.pin, settings())
			kept.Spec = *live.Spec.DeepCopy()
			oldBody, err = SandboxApplyBody(kept)
			if err != nil {
				t.Fatal(err)
			}
			keptAC := BuildSandbox(in.task, in.pin, settings())
			if keptAC.Spec, err = SandboxSpecApply(&live.Spec); err != nil {
				t.Fatal(err)
			}
			if newBody, err = json.Marshal(keptAC); err != nil {
				t.Fatal(err)
			}
			newDoc, oldDoc = nil, nil
			if err := json.Unmarshal(newBody, &newDoc); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(oldBody, &oldDoc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(oldDoc, newDoc); diff != "" {
				t.Errorf("%s, settings %s: the kept body changed (-SandboxApplyBody +apply configuration):\n%s", name, sn, diff)
			}
			compared++
		}
	}
	fmt.Printf("compared %d bodies (%d inputs × %d settings, rendered and kept)\n", compared, len(inputs), len(settingsList))
}
