// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Usage errors end with ExitUsage before any request is made: these runs
// have no cluster to talk to.
func TestRunUsageErrors(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"why without a task":                       {args: []string{"why"}, wantErr: "expected exactly one TASK name, got 0 arguments"},
		"describe with two tasks":                  {args: []string{"describe", "a", "b"}, wantErr: "expected exactly one TASK name, got 2 arguments"},
		"an unknown command":                       {args: []string{"explain"}, wantErr: `unknown command "explain"`},
		"an unknown flag":                          {args: []string{"get", "--wide"}, wantErr: "unknown flag: --wide"},
		"an output format other than json or yaml": {args: []string{"get", "-o", "wide"}, wantErr: `output format "wide"`},
		"a task name with --all-namespaces":        {args: []string{"get", "x", "-A"}, wantErr: "cannot be combined with --all-namespaces"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(context.Background(), test.args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, BuildInfo{})
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d (stderr %q)", code, ExitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), test.wantErr) {
				t.Errorf("stderr %q does not say %q", errOut.String(), test.wantErr)
			}
		})
	}
}

func TestVersionIsTheStampedOne(t *testing.T) {
	var out bytes.Buffer
	code := Run(context.Background(), []string{"--version"}, genericiooptions.IOStreams{Out: &out, ErrOut: &out}, BuildInfo{Version: "v1.2.3", Commit: "abc1234"})
	if code != ExitOK || !strings.Contains(out.String(), "v1.2.3 (commit abc1234)") {
		t.Errorf("--version: exit %d, output %q", code, out.String())
	}
}

// An error may quote text that came from elsewhere (the apiserver's
// answer, what someone wrote into an object, here a flag): its escape
// sequences are shown, not sent to the terminal.
func TestAnErrorIsPrintedEscaped(t *testing.T) {
	var out, errOut bytes.Buffer
	Run(context.Background(), []string{"get", "--x\x1b]52;c;ZXZpbA\x07\x1b[2J"}, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, BuildInfo{})
	if want := "error: unknown flag: --x\\x1b]52;c;ZXZpbA\\x07\\x1b[2J\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}
