// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzSafeNames holds the names' contract for any input: valid, at most 63
// characters, deterministic, and the plain form whenever that is valid. The
// contract promises this for task names (DNS-1123 subdomains); the
// implementation keeps it for every string, so the fuzzer checks it for
// every string.
func FuzzSafeNames(f *testing.F) {
	for _, seed := range []string{
		"", "a", "my-task", "a.b", "a-b", "1abc", "123.456", "0",
		strings.Repeat("a", 59), strings.Repeat("a", 60), strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("abcdefghi.", 25) + "abc",
		strings.Repeat("a", 47) + "." + strings.Repeat("b", 20),
		"Fix_Login", "../..", "café-Ω", "\xff\xfe", "-leading", "trailing-", "a--b", "a..b",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, task string) {
		got := namesFor(task)
		if problems := namesProblems(got); len(problems) > 0 {
			t.Fatalf("task %q: %v", task, problems)
		}
		if again := namesFor(task); again != got {
			t.Fatalf("task %q: %+v, then %+v", task, got, again)
		}
		isTaskName := len(validation.IsDNS1123Subdomain(task)) == 0
		for suffix, name := range map[string]string{"-sbx": got.Sandbox, "-sa": got.ServiceAccount, "-netpol": got.NetworkPolicy} {
			plain := task + suffix
			if len(validation.IsDNS1035Label(plain)) == 0 && name != plain {
				t.Fatalf("task %q: %s name %q, want the plain %q", task, suffix, name, plain)
			}
			if !strings.HasSuffix(name, suffix) {
				t.Fatalf("task %q: %s name %q lacks its suffix", task, suffix, name)
			}
		}
		if isTaskName && len(task) <= 63 && got.Label != task {
			t.Fatalf("task %q: label value %q, want the task name", task, got.Label)
		}
	})
}
