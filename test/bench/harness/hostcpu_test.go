// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The operator's row must follow the binary the bench runs, whatever its
// name: an operator counted under "other" would inflate the machine-bound
// limit's CPU of every other process.
func TestTheOperatorsCPUIsFoundByItsBinarysName(t *testing.T) {
	// This test process stands in for the operator: it has used some CPU.
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := readHostCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	if h.byProcess[operatorKey] <= 0 {
		t.Errorf("no CPU under %q for %s: %v", operatorKey, self, h.byProcess)
	}
}

// On a shared machine another user's integration tests run the same
// test-bed binaries: only the processes of the benchmark's own cluster may
// count under their names, or the apiserver's CPU per task would include
// another cluster's apiserver.
func TestTestBedProcessesOfAnotherClusterAreCountedApart(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to play a test-bed process")
	}
	// A copy of sh named like the scheduler, busy long enough to have
	// used CPU, whose command line names a cluster of its own.
	fake := filepath.Join(t.TempDir(), "kube-scheduler")
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf("caliban-hostcpu-test-%d", os.Getpid())
	// No exec at the end: it would rename the process.
	cmd := exec.Command(fake, "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30`, cluster)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		used, err := processCPU(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if used >= 100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy loop used only %s of CPU in 10 s", used)
		}
		time.Sleep(50 * time.Millisecond)
	}

	mine, err := readHostCPUOf("caliban-operator", cluster)
	if err != nil {
		t.Fatal(err)
	}
	if mine.byProcess["kube-scheduler"] <= 0 {
		t.Errorf("the scheduler of the cluster %s counted no CPU: %v", cluster, mine.byProcess)
	}
	theirs, err := readHostCPUOf("caliban-operator", cluster+"-another")
	if err != nil {
		t.Fatal(err)
	}
	if theirs.byProcess["kube-scheduler"] != 0 {
		t.Errorf("a scheduler of another cluster counted as this cluster's: %v", theirs.byProcess)
	}
	if theirs.byProcess[otherClustersKey] < mine.byProcess["kube-scheduler"] {
		t.Errorf("%q has %s, less than the other cluster's scheduler alone (%s)", otherClustersKey, theirs.byProcess[otherClustersKey], mine.byProcess["kube-scheduler"])
	}
}
