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

// signedBy pins the task with pin and signs it under key, as the operator
// does when it admits a task.
func signedBy(key PinKey, pin *calibanv1alpha1.ResolvedWorkspace) func(*calibanv1alpha1.CalibanTask) {
	return func(t *calibanv1alpha1.CalibanTask) {
		t.CreationTimestamp = tNow
		t.Status.ResolvedWorkspace = pin
		t.Status.PinSignature = SignPin(key.Key, t.UID, pin)
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
	if diff := cmp.Diff(SignPin(fxPinKey.Key, "uid-1", sent), SignPin(fxPinKey.Key, "uid-1", stored)); diff != "" {
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
			if SignPin(fxPinKey.Key, "uid-1", stored) == SignPin(fxPinKey.Key, "uid-1", other) {
				t.Error("two pins that mean different things sign alike")
			}
		})
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
