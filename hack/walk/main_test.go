// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"
	"testing"
)

// The task sync's walk may not grow back unnoticed: these are the counts
// docs/adr/0028-one-sync-one-story.md reports. A change that lengthens the
// walk updates the ADR with the reason; one that shortens it lowers them.
func TestTheTaskSyncWalkIsNoLongerThanTheADRSays(t *testing.T) {
	const stops, files, returns = 29, 9, 12
	w, err := Walk("github.com/caliban-ai/caliban-operator/pkg/...",
		"(*github.com/caliban-ai/caliban-operator/pkg/operator.TaskController).reconcile", "task",
		[]string{"github.com/caliban-ai/caliban-operator/pkg/builders"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Stops) > stops || w.Files > files || w.Returns > returns {
		var b strings.Builder
		for _, s := range w.Stops {
			b.WriteString(s.Caller + " -> " + s.Callee + " [" + s.File + "]\n")
		}
		t.Errorf("the walk from reconcile takes %d stops in %d files, %d back to a file already left; the ADR says at most %d, %d, %d:\n%s",
			len(w.Stops), w.Files, w.Returns, stops, files, returns, b.String())
	}
	// Every stop is one a reader can open.
	for _, s := range w.Stops {
		if _, err := os.Stat("../../" + s.File); err != nil {
			t.Errorf("stop %s -> %s names file %s: %v", s.Caller, s.Callee, s.File, err)
		}
	}
	if len(w.Stops) == 0 || w.Stops[0].Caller != "reconcile" {
		t.Errorf("the walk does not start at reconcile: %+v", w.Stops)
	}
}

func TestAWalkOfAFunctionThatIsNotThereFails(t *testing.T) {
	if _, err := Walk("github.com/caliban-ai/caliban-operator/pkg/builders", "nowhere.Nothing", "task", nil, false); err == nil {
		t.Error("no error for a function that does not exist")
	}
}
