// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

const (
	takeTemplate  = "ws-warm-1a2b3c4d"
	otherTemplate = "ws-warm-9f8e7d6c"
)

// liveClaimed is a claimed Sandbox as the apiserver has it: made from
// template, in mode, serving or not.
func liveClaimed(template string, mode sandboxv1beta1.OperatingMode, serving bool) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "ws-warm-x7k2p", Annotations: map[string]string{AnnotationSandboxTemplateRef: template}}}
	sb.Spec.OperatingMode = mode
	if serving {
		sb.Status.ServiceFQDN = "ws-warm-x7k2p.team.svc.cluster.local"
		sb.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue}}
	}
	return sb
}

func modeOf(m sandboxv1beta1.OperatingMode) *sandboxv1beta1.OperatingMode { return &m }

func TestPlanTake(t *testing.T) {
	running, suspended := sandboxv1beta1.OperatingModeRunning, sandboxv1beta1.OperatingModeSuspended
	provisioning, live := calibanv1alpha1.TaskProvisioning, calibanv1alpha1.TaskRunning
	// rendered is a starting task's take once it knows its template.
	rendered := func(mods ...func(*TakeInput)) TakeInput {
		in := TakeInput{Mode: running, Phase: provisioning, Template: takeTemplate}
		for _, m := range mods {
			m(&in)
		}
		return in
	}
	read := func(sb *sandboxv1beta1.Sandbox) func(*TakeInput) {
		return func(in *TakeInput) { in.Read, in.Live = true, sb }
	}
	refused := func(in *TakeInput) { in.Refused = true }
	cases := map[string]struct {
		in   TakeInput
		want TakeStep
	}{
		"a Sandbox the cache has as the task's in its mode is the task's, with nothing to write": {
			in: TakeInput{Mode: running, Phase: live, Cached: modeOf(running)}, want: TakeStep{Action: TakeCached},
		},
		"a cached Sandbox whose mode an empty spec gives is in that mode": {
			in: TakeInput{Mode: running, Phase: live, Cached: modeOf(running), Recorded: &TakeRecord{}}, want: TakeStep{Action: TakeCached},
		},
		"a cached Sandbox in another mode gets the task's mode": {
			in: TakeInput{Mode: suspended, Phase: live, Cached: modeOf(running)}, want: TakeStep{Action: TakeSetMode},
		},
		"a Sandbox the task labelled, which the cache does not show yet, is the task's record": {
			in: TakeInput{Mode: running, Phase: provisioning, Recorded: &TakeRecord{Labelled: true, Spec: running}}, want: TakeStep{Action: TakeRecorded},
		},
		"a Sandbox the cache does not have needs the task's template first": {
			in: TakeInput{Mode: running, Phase: provisioning}, want: TakeStep{Action: TakeRender},
		},
		"a Sandbox the task only read before it labelled it needs the template too": {
			in: TakeInput{Mode: running, Phase: provisioning, Recorded: &TakeRecord{Spec: running}}, want: TakeStep{Action: TakeRender},
		},
		"a starting task reads the Sandbox before it writes": {
			in: rendered(), want: TakeStep{Action: TakeRead},
		},
		"a starting task whose Sandbox is gone waits for its claim": {
			in: rendered(read(nil)), want: TakeStep{Action: TakeWait},
		},
		"a starting task served another rendering lets its claim go and starts cold": {
			in:   rendered(read(liveClaimed(otherTemplate, running, true))),
			want: TakeStep{Action: TakeLetGo, Launch: WarmPoolRolled(takeTemplate, otherTemplate)},
		},
		"a starting task runs at once on a Sandbox ready from the pool in its mode": {
			in: rendered(read(liveClaimed(takeTemplate, running, true))), want: TakeStep{Action: TakeRunReady},
		},
		"a Sandbox with an empty mode is running, and runs the task at once": {
			in: rendered(read(liveClaimed(takeTemplate, "", true))), want: TakeStep{Action: TakeRunReady},
		},
		"a starting task takes a Sandbox that is not ready yet, setting its mode": {
			in: rendered(read(liveClaimed(takeTemplate, running, false))), want: TakeStep{Action: TakePatch, SetMode: true},
		},
		"a starting task takes a suspended Sandbox, setting its mode": {
			in: rendered(read(liveClaimed(takeTemplate, suspended, true))), want: TakeStep{Action: TakePatch, SetMode: true},
		},
		"a task that read its Sandbox in the mode it wants takes it without touching the spec": {
			in:   rendered(read(liveClaimed(takeTemplate, running, false)), func(in *TakeInput) { in.Recorded = &TakeRecord{Spec: running} }),
			want: TakeStep{Action: TakePatch},
		},
		"a task that read its Sandbox with an empty mode and wants it running leaves the spec": {
			in:   rendered(read(liveClaimed(takeTemplate, "", false)), func(in *TakeInput) { in.Recorded = &TakeRecord{} }),
			want: TakeStep{Action: TakePatch},
		},
		"a task that read its Sandbox running and now wants it suspended sets the mode": {
			in:   TakeInput{Mode: suspended, Phase: provisioning, Template: takeTemplate, Recorded: &TakeRecord{Spec: running}},
			want: TakeStep{Action: TakePatch, SetMode: true},
		},
		"a task that ran takes its Sandbox without reading it first": {
			in: TakeInput{Mode: running, Phase: live, Template: takeTemplate}, want: TakeStep{Action: TakePatch, SetMode: true},
		},
		"a starting task to be suspended takes without reading first": {
			in: TakeInput{Mode: suspended, Phase: provisioning, Template: takeTemplate}, want: TakeStep{Action: TakePatch, SetMode: true},
		},
		"a refused take reads the Sandbox again, even one read before it": {
			in:   rendered(read(liveClaimed(takeTemplate, running, false)), refused, func(in *TakeInput) { in.Read, in.Live = false, nil }),
			want: TakeStep{Action: TakeRead},
		},
		"a refused take of a Sandbox since gone waits": {
			in: rendered(refused, read(nil)), want: TakeStep{Action: TakeWait},
		},
		"a refused take of the task's rendering with more than one owner applies instead": {
			in: rendered(refused, read(liveClaimed(takeTemplate, running, false))), want: TakeStep{Action: TakeApply},
		},
		"a refused take of another rendering before the task ran lets the claim go": {
			in:   rendered(refused, read(liveClaimed(otherTemplate, running, false))),
			want: TakeStep{Action: TakeLetGo, Launch: WarmPoolRolled(takeTemplate, otherTemplate)},
		},
		"a refused take of another rendering an agent ran in keeps it: the operator never restarts an agent": {
			in:   TakeInput{Mode: running, Phase: live, Template: takeTemplate, Refused: true, Read: true, Live: liveClaimed(otherTemplate, running, true)},
			want: TakeStep{Action: TakeKeep},
		},
		"a suspended task's refused take of another rendering keeps it too": {
			in:   TakeInput{Mode: suspended, Phase: calibanv1alpha1.TaskSuspended, Template: takeTemplate, Refused: true, Read: true, Live: liveClaimed(otherTemplate, suspended, false)},
			want: TakeStep{Action: TakeKeep},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PlanTake(tc.in)); diff != "" {
				t.Errorf("PlanTake (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryTakeSettles drives PlanTake as the task controller does, for
// every start and every answer the apiserver can give, and holds that the
// take ends within five steps, so the controller's bound of eight never
// cuts one short.
func TestEveryTakeSettles(t *testing.T) {
	modes := []sandboxv1beta1.OperatingMode{sandboxv1beta1.OperatingModeRunning, sandboxv1beta1.OperatingModeSuspended}
	phases := []calibanv1alpha1.TaskPhase{"", calibanv1alpha1.TaskProvisioning, calibanv1alpha1.TaskRunning, calibanv1alpha1.TaskSuspended}
	records := []*TakeRecord{nil, {}, {Spec: sandboxv1beta1.OperatingModeSuspended}, {Labelled: true}}
	var lives []*sandboxv1beta1.Sandbox
	lives = append(lives, nil)
	for _, tpl := range []string{takeTemplate, otherTemplate} {
		for _, m := range append(modes, "") {
			lives = append(lives, liveClaimed(tpl, m, true), liveClaimed(tpl, m, false))
		}
	}
	ends := map[TakeAction]bool{TakeWait: true, TakeCached: true, TakeSetMode: true, TakeRecorded: true, TakeRunReady: true, TakeApply: true, TakeLetGo: true, TakeKeep: true}
	for _, mode := range modes {
		for _, phase := range phases {
			for _, rec := range records {
				for _, cached := range []*sandboxv1beta1.OperatingMode{nil, modeOf(sandboxv1beta1.OperatingModeRunning)} {
					for _, first := range lives {
						for _, second := range lives {
							for _, patchRefused := range []bool{false, true} {
								in := TakeInput{Mode: mode, Phase: phase, Recorded: rec, Cached: cached}
								reads := []*sandboxv1beta1.Sandbox{first, second}
								steps := 0
								for ; steps < 5; steps++ {
									step := PlanTake(in)
									if ends[step.Action] {
										break
									}
									switch step.Action {
									case TakeRender:
										in.Template = takeTemplate
									case TakeRead:
										in.Read, in.Live, reads = true, reads[0], reads[1:]
									case TakePatch:
										if !patchRefused || in.Refused {
											step.Action = TakeApply // took it: an end
										} else {
											in.Refused, in.Read, in.Live = true, false, nil
											continue
										}
									}
									if ends[step.Action] {
										break
									}
								}
								if steps == 5 {
									t.Fatalf("a take from %+v did not settle in five steps", TakeInput{Mode: mode, Phase: phase, Recorded: rec, Cached: cached})
								}
							}
						}
					}
				}
			}
		}
	}
}
