// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
)

// TakeAction is the next thing a warm task does to take the Sandbox its
// claim holds (PlanTake): a write, an end, or a request for one more
// input.
type TakeAction int

const (
	// TakeWait: nothing to write; the Sandbox is gone or not yet the
	// claim's, and the claim's next update wakes the task.
	TakeWait TakeAction = iota
	// TakeCached: the cache has the Sandbox as the task's, in its mode;
	// the task's own record of it is spent.
	TakeCached
	// TakeSetMode: the cache has the Sandbox as the task's in another
	// mode: apply the task's claimed Sandbox (BuildClaimedSandbox) over it.
	TakeSetMode
	// TakeRecorded: the task labelled the Sandbox in its mode and the
	// cache has not caught up; its record is the Sandbox.
	TakeRecorded
	// TakeRender: the plan needs the SandboxTemplate of the task's pin's
	// rendering (TakeInput.Template).
	TakeRender
	// TakeRead: the plan needs the Sandbox as the apiserver has it
	// (TakeInput.Live).
	TakeRead
	// TakeRunReady: the Sandbox is ready from the pool, of the task's
	// rendering and in its mode: the task runs on it now and labels it on
	// the next pass (docs/adr/0026-warm-start.md#running-first).
	TakeRunReady
	// TakePatch: take the Sandbox with TakeSandboxPatch (TakeStep.SetMode).
	TakePatch
	// TakeApply: the take's test failed on a Sandbox of the task's
	// rendering with more than one owner: apply the claimed Sandbox.
	TakeApply
	// TakeLetGo: the Sandbox is of another rendering and no agent ran in
	// it: delete the claim and start cold (TakeStep.Launch).
	TakeLetGo
	// TakeKeep: an agent ran in the Sandbox, which is of another
	// rendering: the task keeps it as it is, since the operator never
	// restarts an agent.
	TakeKeep
)

// TakeInput is what a warm task knows of the Sandbox its claim holds,
// gathered one step at a time.
type TakeInput struct {
	// Mode is the operatingMode the task wants.
	Mode sandboxv1beta1.OperatingMode
	// Phase is the task's phase; before Running no agent has run in the
	// Sandbox.
	Phase calibanv1alpha1.TaskPhase
	// Cached is the Sandbox's mode as the cache has it, when the cache has
	// it as the claim's; nil otherwise.
	Cached *sandboxv1beta1.OperatingMode
	// Recorded is what the task last read or took of the Sandbox in Mode
	// that the cache does not show yet; nil when there is none.
	Recorded *TakeRecord
	// Template is the SandboxTemplate of the task's rendering, once
	// rendered.
	Template string
	// Read says Live has been read; Live is nil when the Sandbox is gone
	// or not (yet) the claim's.
	Read bool
	Live *sandboxv1beta1.Sandbox
	// Refused says the take's patch failed its test; Live is then the
	// read after it.
	Refused bool
}

// TakeRecord is what a task remembers of a Sandbox it read or took before
// its cache had its labels.
type TakeRecord struct {
	// Labelled: the task's take (labels) was written.
	Labelled bool
	// Spec is the Sandbox's spec.operatingMode as read.
	Spec sandboxv1beta1.OperatingMode
}

// TakeStep is PlanTake's answer.
type TakeStep struct {
	Action TakeAction
	// SetMode (TakePatch): the patch sets the mode too. A Sandbox read in
	// the mode the task wants keeps its spec: a new spec is a new
	// generation, which agent-sandbox answers with a status write of its
	// own.
	SetMode bool
	// Launch (TakeLetGo) is the cold launch that replaces the warm one.
	Launch calibanv1alpha1.Launch
}

// StartingUp says no agent has run yet in the Sandbox of a task in phase.
func StartingUp(phase calibanv1alpha1.TaskPhase) bool {
	switch phase {
	case "", calibanv1alpha1.TaskPending, calibanv1alpha1.TaskProvisioning:
		return true
	}
	return false
}

// PlanTake decides the next step of a warm task's take of the Sandbox its
// claim holds. Each step is a write or an end, or asks for one input the
// plan lacks (TakeRender, TakeRead), which the caller gathers before it
// asks again; so a take reads the apiserver only when the cache cannot
// answer. A Sandbox of another rendering is let go before the task runs
// and kept after.
func PlanTake(in TakeInput) TakeStep {
	switch {
	case in.Cached != nil && *in.Cached == in.Mode:
		return TakeStep{Action: TakeCached}
	case in.Cached != nil:
		return TakeStep{Action: TakeSetMode}
	case in.Recorded != nil && in.Recorded.Labelled:
		return TakeStep{Action: TakeRecorded}
	case in.Template == "":
		return TakeStep{Action: TakeRender}
	}
	starting := StartingUp(in.Phase)
	if in.Refused {
		if !in.Read {
			return TakeStep{Action: TakeRead}
		}
		switch {
		case in.Live == nil:
			return TakeStep{Action: TakeWait}
		case in.Live.Annotations[AnnotationSandboxTemplateRef] != in.Template && starting:
			return TakeStep{Action: TakeLetGo, Launch: WarmPoolRolled(in.Template, in.Live.Annotations[AnnotationSandboxTemplateRef])}
		case in.Live.Annotations[AnnotationSandboxTemplateRef] != in.Template:
			return TakeStep{Action: TakeKeep}
		}
		// Ours and of the task's rendering, with more than one owner.
		return TakeStep{Action: TakeApply}
	}
	if starting && in.Mode == sandboxv1beta1.OperatingModeRunning {
		// Before the task runs, a Sandbox ready from the pool runs it at
		// once: the labels can follow.
		if !in.Read {
			return TakeStep{Action: TakeRead}
		}
		switch got := in.Live; {
		case got == nil:
			return TakeStep{Action: TakeWait}
		case got.Annotations[AnnotationSandboxTemplateRef] != in.Template:
			return TakeStep{Action: TakeLetGo, Launch: WarmPoolRolled(in.Template, got.Annotations[AnnotationSandboxTemplateRef])}
		case LiveMode(got.Spec.OperatingMode) == in.Mode && SandboxServing(&got.Status):
			return TakeStep{Action: TakeRunReady}
		}
	}
	return TakeStep{Action: TakePatch, SetMode: in.Recorded == nil || LiveMode(in.Recorded.Spec) != in.Mode}
}
