package harness

import (
	"os"
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
