// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The launcher is tested on shell scripts that stand in for the operator
// binary: what it passes, keeps and retries does not depend on what runs.
// The tests do not run in parallel, so that no other test's fork inherits
// a script still open for writing (ETXTBSY).

// fakeOperator writes a shell script into a fresh directory and returns
// its path.
func fakeOperator(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-operator")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartOperatorPassesItsSettingsAndKeepsStdoutAndStderrApart(t *testing.T) {
	// A setting exported in the developer's shell must not reach the
	// process; the caller's own must.
	t.Setenv("CALIBAN_LEAKED", "from-the-shell")
	bin := fakeOperator(t, `echo "metrics=$CALIBAN_METRICS_BIND_ADDRESS leaked=$CALIBAN_LEAKED given=$CALIBAN_GIVEN"
echo "refused" >&2
exit 3
`)
	logPath := filepath.Join(t.TempDir(), "operator.log")
	op, err := StartOperator(OperatorOptions{Name: "fake", Binary: bin, Env: []string{"CALIBAN_GIVEN=yes"}, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	code, err := op.Wait(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || op.ExitCode() != 3 {
		t.Errorf("exit code %d (ExitCode %d), want 3", code, op.ExitCode())
	}
	if want := "metrics=" + op.MetricsAddr + " leaked= given=yes\n"; op.Stdout() != want {
		t.Errorf("stdout %q, want %q", op.Stdout(), want)
	}
	if op.Stderr() != "refused\n" {
		t.Errorf("stderr %q, want %q", op.Stderr(), "refused\n")
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range map[string]string{"Output": op.Output(), "the log file": string(log)} {
		if !strings.Contains(where, "given=yes") || !strings.Contains(where, "refused") {
			t.Errorf("%q lacks stdout or stderr", where)
		}
	}
	if err := op.Running(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Running() = %v, want how the process ended", err)
	}
}

func TestStopKillsAProcessThatIgnoresSIGTERMAndSaysSo(t *testing.T) {
	for name, tc := range map[string]struct {
		trap     string
		timedOut bool
		code     int
	}{
		"exits on SIGTERM": {trap: "trap 'exit 0' TERM", code: 0},
		"ignores SIGTERM":  {trap: "trap '' TERM", timedOut: true, code: -1},
		"fails on SIGTERM": {trap: "trap 'exit 4' TERM", code: 4},
	} {
		t.Run(name, func(t *testing.T) {
			op, err := StartOperator(OperatorOptions{Name: "fake", Binary: fakeOperator(t, tc.trap+"\nwhile :; do sleep 0.1; done\n")})
			if err != nil {
				t.Fatal(err)
			}
			// Give the shell time to set its trap.
			time.Sleep(300 * time.Millisecond)
			err = op.Stop(time.Second)
			if got := errors.Is(err, ErrStopTimedOut); got != tc.timedOut {
				t.Errorf("Stop() = %v; timed out %v, want %v", err, got, tc.timedOut)
			}
			if (err == nil) != (tc.code == 0) {
				t.Errorf("Stop() = %v for exit code %d", err, tc.code)
			}
			if op.ExitCode() != tc.code {
				t.Errorf("exit code %d, want %d", op.ExitCode(), tc.code)
			}
		})
	}
}

func TestKeepLinesKeepsTheLastLines(t *testing.T) {
	op, err := StartOperator(OperatorOptions{Name: "fake", Binary: fakeOperator(t, "i=1; while [ $i -le 100 ]; do echo $i; i=$((i+1)); done\n"), KeepLines: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if want := "98\n99\n100\n"; op.Output() != want {
		t.Errorf("Output() = %q, want %q", op.Output(), want)
	}
}

func TestRunOperatorTriesAnotherPortOnlyWhenItsPortWasTaken(t *testing.T) {
	for name, tc := range map[string]struct {
		says   string
		starts int
	}{
		"its port was taken":  {says: "CALIBAN_METRICS_BIND_ADDRESS 127.0.0.1:1: listen tcp 127.0.0.1:1: bind: address already in use", starts: 3},
		"it refused settings": {says: "CALIBAND_PORT 7500 is inside the agent port window", starts: 1},
	} {
		t.Run(name, func(t *testing.T) {
			starts := filepath.Join(t.TempDir(), "starts")
			bin := fakeOperator(t, `echo "$CALIBAN_METRICS_BIND_ADDRESS" >> "$STARTS"
echo "`+tc.says+`" >&2
exit 1
`)
			op, err := RunOperator(t, OperatorOptions{Name: "fake", Binary: bin, Env: []string{"STARTS=" + starts}})
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(starts)
			if err != nil {
				t.Fatal(err)
			}
			addrs := strings.Fields(string(data))
			if len(addrs) != tc.starts {
				t.Errorf("started %d times (%v), want %d", len(addrs), addrs, tc.starts)
			}
			seen := map[string]bool{}
			for _, a := range addrs {
				if seen[a] {
					t.Errorf("address %s was given twice: %v", a, addrs)
				}
				seen[a] = true
			}
			if !op.Exited() || op.ExitCode() != 1 {
				t.Errorf("the last start: exited %v with %d, want exited with 1", op.Exited(), op.ExitCode())
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb", 5, "a\nb"},
		{"", 3, ""},
	} {
		if got := LastLines(tc.in, tc.n); got != tc.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
