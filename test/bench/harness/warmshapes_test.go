// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// sandboxOwnedBy is a Sandbox named name whose controller is an owner of
// kind with uid (no owner for an empty kind).
func sandboxOwnedBy(name, kind string, uid types.UID) unstructured.Unstructured {
	u := unstructured.Unstructured{}
	u.SetName(name)
	if kind != "" {
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{Kind: kind, Name: "owner", UID: uid, Controller: &yes}})
	}
	return u
}

func TestSandboxesPerClaimAndDuplicates(t *testing.T) {
	sandboxes := []unstructured.Unstructured{
		// Adopted from the pool, and then one made from the template
		// under the claim's name: agent-sandbox v1.0.3's duplicate.
		sandboxOwnedBy("pool-abcde", "SandboxClaim", "uid-a"),
		sandboxOwnedBy("t-00000-claim", "SandboxClaim", "uid-a"),
		sandboxOwnedBy("pool-fghij", "SandboxClaim", "uid-b"),
		// Still in the pool, or owned by no one: no claim's.
		sandboxOwnedBy("pool-klmno", "SandboxWarmPool", "uid-pool"),
		sandboxOwnedBy("stray", "", ""),
	}
	// A non-controller owner reference to a claim does not count.
	notController := sandboxOwnedBy("other", "", "")
	notController.SetOwnerReferences([]metav1.OwnerReference{{Kind: "SandboxClaim", Name: "c", UID: "uid-b"}})
	sandboxes = append(sandboxes, notController)

	counts := sandboxesPerClaim(sandboxes)
	if diff := cmp.Diff(map[types.UID]int{"uid-a": 2, "uid-b": 1}, counts); diff != "" {
		t.Errorf("sandboxesPerClaim (-want +got):\n%s", diff)
	}
	// uid-c has no Sandbox; "" is a task whose claim was not found.
	if got := tasksWithDuplicates([]types.UID{"uid-a", "uid-b", "uid-c", ""}, counts); got != 1 {
		t.Errorf("tasksWithDuplicates = %d, want 1", got)
	}
}

func TestSandboxOwnersPeak(t *testing.T) {
	s := newSandboxOwners()
	s.observe("pool-1", false, "", false) // in the pool
	s.observe("pool-1", false, "a", true) // adopted by claim a
	s.observe("pool-2", false, "b", true)
	s.observe("a-claim", false, "a", true) // a's duplicate
	s.observe("a-claim", false, "a", true) // its update counts once
	s.observe("pool-3", false, "b", true)  // b's duplicate
	if dups, most := s.peaks(); dups != 2 || most != 2 {
		t.Errorf("peaks = %d, %d; want 2, 2", dups, most)
	}
	s.observe("a-claim", true, "", false)
	s.observe("pool-3", true, "", false)
	if s.dups != 0 {
		t.Errorf("dups after the duplicates went = %d, want 0", s.dups)
	}
	s.observe("b-3", false, "b", true)
	s.observe("b-4", false, "b", true)
	if dups, most := s.peaks(); dups != 2 || most != 3 {
		t.Errorf("peaks = %d, %d; want 2 (kept), 3", dups, most)
	}
}

func TestRunningToSelected(t *testing.T) {
	var never time.Time
	running := []time.Time{at(10), at(10), at(10), at(10), never}
	selected := []time.Time{at(8), at(10), at(13), never, at(5)}
	lags, first, unselected := runningToSelected(running, selected)
	if diff := cmp.Diff([]time.Duration{0, 0, 3 * time.Second}, lags); diff != "" {
		t.Errorf("lags (-want +got):\n%s", diff)
	}
	if first != 1 || unselected != 1 {
		t.Errorf("runningFirst, unselected = %d, %d; want 1, 1", first, unselected)
	}
	if got := percentile(lags, 100); got != 3000 {
		t.Errorf("max = %v ms, want 3000", got)
	}
	if got := percentile(lags, 50); got != 0 {
		t.Errorf("p50 = %v ms, want 0", got)
	}
}

func TestPodSelection(t *testing.T) {
	p := &podSelection{selected: map[types.UID]time.Time{}}
	pod := func(uid string, ready corev1.ConditionStatus) *corev1.Pod {
		pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if uid != "" {
			pd.Labels[builders.LabelClaimUID] = uid
		}
		pd.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		return pd
	}
	p.observe(pod("", corev1.ConditionTrue), at(1))   // a pool pod, unclaimed
	p.observe(pod("a", corev1.ConditionFalse), at(2)) // labelled, not Ready
	p.observe(pod("a", corev1.ConditionTrue), at(3))
	p.observe(pod("a", corev1.ConditionTrue), at(4)) // the first moment stays
	if got := p.at("a"); !got.Equal(at(3)) {
		t.Errorf("selected at %v, want %v", got, at(3))
	}
	if got := p.at("b"); !got.IsZero() {
		t.Errorf("b selected at %v, want never", got)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]float64{50: 50, 99: 99, 100: 100, 0: 1} {
		if got := percentile(ds, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
}

func TestRunningBeforeSelectedCountsTheApiserversOrder(t *testing.T) {
	tests := map[string]struct {
		running, selected []uint64
		want              int
	}{
		"Running written after the pod was selected":         {running: []uint64{20}, selected: []uint64{10}, want: 0},
		"Running written before the pod was selected":        {running: []uint64{10}, selected: []uint64{20}, want: 1},
		"a task never Running or never selected is left out": {running: []uint64{0, 10}, selected: []uint64{5, 0}, want: 0},
		"each task counted on its own":                       {running: []uint64{10, 30, 5}, selected: []uint64{20, 25, 6}, want: 2},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			if got := runningBeforeSelected(test.running, test.selected); got != test.want {
				t.Errorf("runningBeforeSelected = %d, want %d", got, test.want)
			}
		})
	}
}
