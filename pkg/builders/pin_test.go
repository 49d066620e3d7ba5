// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
)

var fxPinKey = PinKey{Key: []byte("0123456789abcdef0123456789abcdef"), Since: tEarlier.Time}

// signedBy pins the task with pin and signs it, with the task's launch,
// under key, as the operator does when it admits a task.
func signedBy(key PinKey, pin *calibanv1alpha1.ResolvedWorkspace) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.CreationTimestamp = tNow
		t.Status.ResolvedWorkspace = pin
		t.Status.PinSignature = SignPin(key.Key, t.UID, pin, taskLaunchType(t))
	}
}

// signedV1By is signedBy as the release before signed launches did: the
// UID and the pin alone.
func signedV1By(key PinKey, pin *calibanv1alpha1.ResolvedWorkspace) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.CreationTimestamp = tNow
		t.Status.ResolvedWorkspace = pin
		t.Status.PinSignature = signPinV1(key.Key, t.UID, pin)
	}
}

// launched gives the task a launch of type typ; Warm with a claim.
func launched(typ calibanv1alpha1.LaunchType) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Launch = &calibanv1alpha1.Launch{Type: typ, Reason: ReasonNoWarmPool, Message: "Workspace 'ws' keeps no warm pool"}
		if typ == calibanv1alpha1.LaunchWarm {
			t.Status.Launch = &calibanv1alpha1.Launch{Type: typ, Reason: ReasonLaunchWarmPool, Message: "claims a Sandbox from warm pool 'ws-warm'",
				Claim: &calibanv1alpha1.ClaimReference{Name: "fix-bug-claim", UID: "claim-uid"}}
		}
	}
}

// flipped changes the task's launch as a status writer would, after it
// was signed: to typ, or none.
func flipped(typ calibanv1alpha1.LaunchType) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		if typ == "" {
			t.Status.Launch = nil
			return
		}
		t.Status.Launch = t.Status.Launch.DeepCopy()
		t.Status.Launch.Type = typ
	}
}

func TestUntrustedPin(t *testing.T) {
	trusting := func() *calibanv1alpha1.ResolvedWorkspace {
		pin := fxPin()
		pin.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
		return pin
	}
	otherKey := PinKey{Key: []byte("another key, another operator...."), Since: tEarlier.Time}
	tests := map[string]struct {
		task *calibanv1alpha1.CalibanTask
		// want is a word of the message; "" when the pin is trusted.
		want string
	}{
		"a pin the operator signed is trusted": {task: fxTask(signedBy(fxPinKey, fxPin()))},
		"a task without a pin has nothing to distrust": {task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = tNow
		})},
		"a signed pin edited afterwards is not": {task: fxTask(signedBy(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) {
			t.Status.ResolvedWorkspace.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
		}), want: "does not match it"},
		"a pin without a signature on a task created since the key is not": {task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = tNow
			t.Status.ResolvedWorkspace = trusting()
		}), want: "carries no status.pinSignature"},
		"a pin signed under another key is not": {task: fxTask(signedBy(otherKey, fxPin())), want: "does not match it"},
		"a pin and signature copied from another task are not": {task: fxTask(signedBy(fxPinKey, trusting()), func(t *calibanv1alpha1.CalibanTask) {
			t.UID = "uid-of-another-task"
		}), want: "does not match it"},
		"a task created before the key was pinned by an operator that did not sign": {task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = metav1.NewTime(tEarlier.Add(-1))
			t.Status.ResolvedWorkspace = fxPin()
		})},
		"a task created in the key's second may have been pinned before it": {task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = tEarlier
			t.Status.ResolvedWorkspace = fxPin()
		})},
		"a task created a second after the key is held to the signature": {task: fxTask(func(t *calibanv1alpha1.CalibanTask) {
			t.CreationTimestamp = metav1.NewTime(tEarlier.Add(time.Second))
			t.Status.ResolvedWorkspace = fxPin()
		}), want: "carries no status.pinSignature"},
		"a pin the release before signed (v1) is trusted": {task: fxTask(signedV1By(fxPinKey, fxPin()))},
		"a v1 pin edited afterwards is not": {task: fxTask(signedV1By(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) {
			t.Status.ResolvedWorkspace.AgentPolicy = &calibanv1alpha1.AgentPolicy{AllowUnattended: true}
		}), want: "does not match it"},
		"a v1 signature relabelled v2 is not": {task: fxTask(signedV1By(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) {
			t.Status.PinSignature = "v2:" + strings.TrimPrefix(t.Status.PinSignature, "v1:")
		}), want: "does not match it"},
		"a pin whose launch was flipped is still the pin the operator signed (the launch is UntrustedLaunch's)": {
			task: fxTask(launched(calibanv1alpha1.LaunchCold), signedBy(fxPinKey, fxPin()), flipped(calibanv1alpha1.LaunchWarm))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := UntrustedPin(tc.task, fxPinKey)
			switch {
			case tc.want == "" && f != nil:
				t.Errorf("distrusted: %+v", *f)
			case tc.want != "" && f == nil:
				t.Error("trusted")
			case tc.want != "":
				if f.Reason != ReasonPinNotTrusted || !strings.Contains(f.Message, tc.want) || !strings.Contains(f.Message, "status.resolvedWorkspace") {
					t.Errorf("failure %+v, want reason %s and a message naming status.resolvedWorkspace with %q", *f, ReasonPinNotTrusted, tc.want)
				}
			}
		})
	}
}

// The apiserver applies the schema's defaults to the pin the operator
// sends: the signature must verify on what it stores, and tell apart every
// pin that means something else.
func TestSignPinSurvivesTheRoundTrip(t *testing.T) {
	sent := fxPin()
	sent.Egress = &calibanv1alpha1.Egress{}
	sent.Sources = []calibanv1alpha1.Source{{Name: "app", Repo: "https://example.com/app.git", Path: "/work/app"}}
	stored := fxPin()
	stored.Egress = &calibanv1alpha1.Egress{Allow: []calibanv1alpha1.EgressRule{}}
	stored.Sources = []calibanv1alpha1.Source{{Name: "app", Repo: "https://example.com/app.git", Path: "/work/app", Ref: "main"}}
	if diff := cmp.Diff(SignPin(fxPinKey.Key, "uid-1", sent, calibanv1alpha1.LaunchCold), SignPin(fxPinKey.Key, "uid-1", stored, calibanv1alpha1.LaunchCold)); diff != "" {
		t.Errorf("signatures of one pin as sent and as stored differ (-sent +stored):\n%s", diff)
	}

	differs := map[string]func(*calibanv1alpha1.ResolvedWorkspace){
		"no egress (allow all) against DNS only": func(p *calibanv1alpha1.ResolvedWorkspace) { p.Egress = nil },
		"no enabledPlugins (all) against an empty list (none)": func(p *calibanv1alpha1.ResolvedWorkspace) {
			p.AgentPolicy = &calibanv1alpha1.AgentPolicy{EnabledPlugins: []string{}}
		},
		"another ref": func(p *calibanv1alpha1.ResolvedWorkspace) { p.Sources[0].Ref = "dev" },
		"an agentPolicy that sets autoAllow false against none": func(p *calibanv1alpha1.ResolvedWorkspace) {
			p.AgentPolicy = &calibanv1alpha1.AgentPolicy{AutoAllow: new(false)}
		},
	}
	for name, change := range differs {
		t.Run(name, func(t *testing.T) {
			other := stored.DeepCopy()
			change(other)
			if SignPin(fxPinKey.Key, "uid-1", stored, calibanv1alpha1.LaunchCold) == SignPin(fxPinKey.Key, "uid-1", other, calibanv1alpha1.LaunchCold) {
				t.Error("two pins that mean different things sign alike")
			}
		})
	}
}

// The launch decided with a pin is signed with it: one pin under another
// launch type signs otherwise, and a v2 signature is never a v1 one.
func TestSignPinSignsTheLaunchType(t *testing.T) {
	warm := SignPin(fxPinKey.Key, "uid-1", fxPin(), calibanv1alpha1.LaunchWarm)
	cold := SignPin(fxPinKey.Key, "uid-1", fxPin(), calibanv1alpha1.LaunchCold)
	if warm == cold {
		t.Error("a pin signs alike with a Warm and a Cold launch")
	}
	for _, sig := range []string{warm, cold} {
		if !strings.HasPrefix(sig, "v2:") {
			t.Errorf("signature %q, want v2", sig)
		}
	}
	if v1 := signPinV1(fxPinKey.Key, "uid-1", fxPin()); !strings.HasPrefix(v1, "v1:") || strings.TrimPrefix(v1, "v1:") == strings.TrimPrefix(cold, "v2:") {
		t.Errorf("the v1 signature %q is not v1, or is the v2 one's", v1)
	}
}

// status.launch decides whether the operator makes a claim or a Sandbox,
// and which pod the task's NetworkPolicy selects: it is followed only as
// the operator decided it.
func TestUntrustedLaunch(t *testing.T) {
	const (
		warm = calibanv1alpha1.LaunchWarm
		cold = calibanv1alpha1.LaunchCold
	)
	ownSandbox, claim := LaunchChildren{Sandbox: true}, LaunchChildren{Claim: true}
	oldKey := PinKey{Key: []byte("the key before it was made again."), Since: tEarlier.Time}
	tests := map[string]struct {
		task     *calibanv1alpha1.CalibanTask
		children LaunchChildren
		// want is a phrase of the message; "" when the launch is followed.
		want string
	}{
		"a cold launch signed with the pin is followed": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin())), children: ownSandbox},
		"a warm launch signed with the pin is followed": {
			task: fxTask(launched(warm), signedBy(fxPinKey, fxPin())), children: claim},
		"a cold launch flipped to Warm is not": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin()), flipped(warm)), children: ownSandbox,
			want: "status.launch.type Warm is not the launch caliban-operator decided (caliban-operator signed Cold with the pin)"},
		"a warm launch flipped to Cold is not": {
			task: fxTask(launched(warm), signedBy(fxPinKey, fxPin()), flipped(cold)), children: claim,
			want: "status.launch.type Cold is not the launch caliban-operator decided (caliban-operator signed Warm with the pin)"},
		"a warm launch taken away is a cold one, and not the one signed": {
			task: fxTask(launched(warm), signedBy(fxPinKey, fxPin()), flipped("")), children: claim,
			want: "caliban-operator signed Warm with the pin"},
		"a signed launch is followed whatever the children show: the signature says": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin())), children: claim},
		"another claim UID is no reason to distrust: the sync takes the claim the task controls": {
			task: fxTask(launched(warm), signedBy(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) { t.Status.Launch.Claim.UID = "another" }), children: claim},
		"another reason or message is no reason to distrust: they only say why": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) { t.Status.Launch.Reason, t.Status.Launch.Message = "X", "y" })},
		"a task without a pin has no launch to distrust": {task: fxTask(launched(warm))},
		"a pin that does not verify is UntrustedPin's to say": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin()), func(t *calibanv1alpha1.CalibanTask) { t.Status.PinSignature = "v2:forged" })},

		"a v1 pin's cold launch beside its own Sandbox is followed": {
			task: fxTask(launched(cold), signedV1By(fxPinKey, fxPin())), children: ownSandbox},
		"a v1 pin's warm launch beside its claim is followed": {
			task: fxTask(launched(warm), signedV1By(fxPinKey, fxPin())), children: claim},
		"a v1 pin's launch flipped to Warm beside its own Sandbox is not": {
			task: fxTask(launched(cold), signedV1By(fxPinKey, fxPin()), flipped(warm)), children: ownSandbox,
			want: "the pin was signed before launches were, and the task's own Sandbox fix-bug-sbx says Cold"},
		"a v1 pin's launch flipped to Cold beside its claim is not": {
			task: fxTask(launched(warm), signedV1By(fxPinKey, fxPin()), flipped(cold)), children: claim,
			want: "the task's SandboxClaim fix-bug-claim says Warm"},
		"a v1 pin's launch taken away beside its claim is not": {
			task: fxTask(launched(warm), signedV1By(fxPinKey, fxPin()), flipped("")), children: claim,
			want: "status.launch.type Cold is not"},
		"a v1 pin with neither child yet is taken as stored": {
			task: fxTask(launched(warm), signedV1By(fxPinKey, fxPin()))},
		"a v1 pin with both children is not followed either way": {
			task: fxTask(launched(cold), signedV1By(fxPinKey, fxPin())), children: LaunchChildren{Claim: true, Sandbox: true},
			want: "the task has both SandboxClaim fix-bug-claim and Sandbox fix-bug-sbx"},
		"a task pinned before warm start, with no launch, beside its own Sandbox is followed": {
			task: fxTask(signedV1By(fxPinKey, fxPin())), children: ownSandbox},
		"a task older than the key, flipped to Warm beside its own Sandbox, is not": {
			task: fxTask(pinned, launched(warm)), children: ownSandbox, want: "says Cold"},
		"a task older than the key beside its own Sandbox is followed": {
			task: fxTask(pinned, launched(cold)), children: ownSandbox},
		"a v2 signature under another key on a task older than the key (the key was made again) is read from the children": {
			task: fxTask(launched(cold), signedBy(oldKey, fxPin()), flipped(warm), func(t *calibanv1alpha1.CalibanTask) {
				t.CreationTimestamp = metav1.NewTime(tEarlier.Add(-time.Second))
			}), children: ownSandbox, want: "says Cold"},
		"a launch the operator signed again is followed, however old the task (its claim may still be in the cache)": {
			task: fxTask(launched(warm), signedBy(fxPinKey, fxPin()), flipped(cold), func(t *calibanv1alpha1.CalibanTask) {
				t.CreationTimestamp = metav1.NewTime(tEarlier.Add(-time.Second))
				t.Status.PinSignature = SignPin(fxPinKey.Key, t.UID, t.Status.ResolvedWorkspace, cold)
			}), children: claim},
		"a signed launch flipped on a task older than the key is not": {
			task: fxTask(launched(cold), signedBy(fxPinKey, fxPin()), flipped(warm), func(t *calibanv1alpha1.CalibanTask) {
				t.CreationTimestamp = metav1.NewTime(tEarlier.Add(-time.Second))
			}), want: "caliban-operator signed Cold with the pin"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := UntrustedLaunch(tc.task, fxPinKey, tc.children)
			switch {
			case tc.want == "" && f != nil:
				t.Errorf("distrusted: %+v", *f)
			case tc.want != "" && f == nil:
				t.Error("followed")
			case tc.want != "":
				if f.Reason != ReasonLaunchNotTrusted || !strings.Contains(f.Message, tc.want) || !strings.Contains(f.Message, "nothing new is run from it") {
					t.Errorf("failure %+v, want reason %s and a message with %q", *f, ReasonLaunchNotTrusted, tc.want)
				}
			}
		})
	}
}

// A task whose launch is not trusted is Failed with what the operator last
// wrote of its launch and Sandbox: it writes nothing of a launch it does not
// follow.
func TestAnUntrustedLaunchKeepsTheLaunchAndSandboxAsTheyAre(t *testing.T) {
	task := fxTask(launched(calibanv1alpha1.LaunchCold), signedBy(fxPinKey, fxPin()), flipped(calibanv1alpha1.LaunchWarm), func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Phase, t.Status.SandboxRef = calibanv1alpha1.TaskRunning, &calibanv1alpha1.SandboxReference{Name: "fix-bug-sbx"}
	})
	failure := UntrustedLaunch(task, fxPinKey, LaunchChildren{Sandbox: true})
	if failure == nil {
		t.Fatal("the flipped launch is followed")
	}
	got := TaskStatus(TaskStatusInput{Task: task, Failure: failure, Pin: task.Status.ResolvedWorkspace, Posture: "supervised",
		PinSignature: task.Status.PinSignature, Now: tNow}, config.DefaultAgentSettings())
	if diff := cmp.Diff(task.Status.Launch, got.Launch); diff != "" {
		t.Errorf("launch (-stored +written):\n%s", diff)
	}
	if diff := cmp.Diff(task.Status.SandboxRef, got.SandboxRef); diff != "" {
		t.Errorf("sandboxRef (-stored +written):\n%s", diff)
	}
	if got.Phase != calibanv1alpha1.TaskFailed || got.CalibandEndpoint != "" || got.PinSignature != task.Status.PinSignature {
		t.Errorf("phase %s endpoint %q signature %q, want Failed, none, the stored signature", got.Phase, got.CalibandEndpoint, got.PinSignature)
	}
	none := fxTask(launched(calibanv1alpha1.LaunchWarm), signedBy(fxPinKey, fxPin()), flipped(""))
	got = TaskStatus(TaskStatusInput{Task: none, Failure: UntrustedLaunch(none, fxPinKey, LaunchChildren{Claim: true}), Pin: none.Status.ResolvedWorkspace, Now: tNow}, config.DefaultAgentSettings())
	if got.Launch != nil {
		t.Errorf("a launch taken away is written back as %+v, want none", got.Launch)
	}
}

// Decide signs a new pin with the launch it decides with it, and a
// pinned task's sync checks the launch right after the pin, before
// anything is made or applied by it.
func TestDecideSignsTheLaunchWithThePinAndChecksIt(t *testing.T) {
	task := fxTask(func(t *calibanv1alpha1.CalibanTask) { t.CreationTimestamp = tNow })
	d, err := Decide(task, TaskFacts{Workspace: fxWorkspace(), PinKey: fxPinKey}, config.DefaultAgentSettings())
	if err != nil || d.Failure != nil || !d.NewlyPinned || d.Launch == nil {
		t.Fatalf("Decide = %+v, %v; want a new pin and its launch", d, err)
	}
	if want := SignPin(fxPinKey.Key, task.UID, d.Pin, d.Launch.Type); d.PinSignature != want {
		t.Errorf("the new pin's signature %q, want %q: v2, over the UID, the pin and launch type %s", d.PinSignature, want, d.Launch.Type)
	}

	pinned := taskFrom(task, func(t *calibanv1alpha1.CalibanTask) {
		t.Status.ResolvedWorkspace, t.Status.PinSignature, t.Status.Launch = d.Pin, d.PinSignature, d.Launch
		t.Status.PermissionPosture = d.Posture
	})
	facts := TaskFacts{PinKey: fxPinKey, Launched: LaunchChildren{Sandbox: true}}
	if d, err := Decide(pinned, facts, config.DefaultAgentSettings()); err != nil || d.Failure != nil {
		t.Errorf("the pinned task: Decide = %+v, %v; want it to run", d, err)
	}
	if d, err := Decide(taskFrom(pinned, flipped(calibanv1alpha1.LaunchWarm)), facts, config.DefaultAgentSettings()); err != nil ||
		d.Failure == nil || d.Failure.Reason != ReasonLaunchNotTrusted {
		t.Errorf("the pinned task flipped to Warm: Decide = %+v, %v; want it Failed, %s", d, err, ReasonLaunchNotTrusted)
	}
}

func TestThePinSignatureIsWrittenWithThePin(t *testing.T) {
	task := fxTask()
	got := TaskStatus(TaskStatusInput{Task: task, Pin: fxPin(), Posture: "supervised", PinSignature: "v1:sig", Now: tNow}, config.DefaultAgentSettings())
	if got.PinSignature != "v1:sig" {
		t.Errorf("pinSignature %q, want v1:sig", got.PinSignature)
	}
	got = TaskStatus(TaskStatusInput{Task: task, PinSignature: "v1:sig", Now: tNow}, config.DefaultAgentSettings())
	if got.PinSignature != "" {
		t.Errorf("a task without a pin carries pinSignature %q", got.PinSignature)
	}
}
