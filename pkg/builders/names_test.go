// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// safeNameSet is every name derived from one task name.
type safeNameSet struct {
	Sandbox, ServiceAccount, NetworkPolicy, Label string
}

func namesFor(task string) safeNameSet {
	return safeNameSet{
		Sandbox:        SandboxName(task),
		ServiceAccount: ServiceAccountName(task),
		NetworkPolicy:  NetworkPolicyName(task),
		Label:          TaskLabelValue(task),
	}
}

// namesProblems lists every way the derived names break their contract.
func namesProblems(n safeNameSet) []string {
	var problems []string
	for kind, name := range map[string]string{"Sandbox": n.Sandbox, "ServiceAccount": n.ServiceAccount, "NetworkPolicy": n.NetworkPolicy} {
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s name %q: %v", kind, name, errs))
		}
	}
	if errs := content.IsLabelValue(n.Label); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("label value %q: %v", n.Label, errs))
	}
	return problems
}

// These names are pinned literally: they are the names of objects that
// already exist in clusters, so any change to the rule must fail here first.
func TestSafeNamesAreStable(t *testing.T) {
	a := strings.Repeat
	tests := map[string]struct {
		// input
		task string
		// expected names
		want safeNameSet
	}{
		"a short name keeps the plain form everywhere": {
			task: "my-task",
			want: safeNameSet{"my-task-sbx", "my-task-sa", "my-task-netpol", "my-task"},
		},
		"a dashed name keeps the plain form": {
			task: "a-b",
			want: safeNameSet{"a-b-sbx", "a-b-sa", "a-b-netpol", "a-b"},
		},
		"a dotted name is hashed in object names but kept as the label value": {
			task: "a.b",
			want: safeNameSet{"a-b-2e7336dc8e-sbx", "a-b-2e7336dc8e-sa", "a-b-2e7336dc8e-netpol", "a.b"},
		},
		"a name with several dots turns each dot into a dash": {
			task: "team.frontend.fix-login",
			want: safeNameSet{
				"team-frontend-fix-login-1e2079754a-sbx", "team-frontend-fix-login-1e2079754a-sa",
				"team-frontend-fix-login-1e2079754a-netpol", "team.frontend.fix-login",
			},
		},
		"a digit-leading name loses its digits in object names and keeps them in the label": {
			task: "1abc",
			want: safeNameSet{"abc-57cb980e41-sbx", "abc-57cb980e41-sa", "abc-57cb980e41-netpol", "1abc"},
		},
		"a name of digits and dots becomes t plus the hash": {
			task: "123.456",
			want: safeNameSet{"t-52dad41684-sbx", "t-52dad41684-sa", "t-52dad41684-netpol", "123.456"},
		},
		"a 59-character name is the longest with a plain Sandbox name": {
			task: a("a", 50) + "-" + a("b", 8),
			want: safeNameSet{
				a("a", 50) + "-" + a("b", 8) + "-sbx",
				a("a", 50) + "-" + a("b", 8) + "-sa",
				a("a", 45) + "-7322b62c11-netpol",
				a("a", 50) + "-" + a("b", 8),
			},
		},
		"a 60-character name is hashed for the Sandbox but still fits -sa": {
			task: a("a", 50) + "-" + a("b", 9),
			want: safeNameSet{
				a("a", 48) + "-ad5ea3d5fd-sbx",
				a("a", 50) + "-" + a("b", 9) + "-sa",
				a("a", 45) + "-ad5ea3d5fd-netpol",
				a("a", 50) + "-" + a("b", 9),
			},
		},
		"a 63-character name is hashed for every object but is its own label value": {
			task: a("a", 63),
			want: safeNameSet{a("a", 48) + "-7d3e74a05d-sbx", a("a", 49) + "-7d3e74a05d-sa", a("a", 45) + "-7d3e74a05d-netpol", a("a", 63)},
		},
		"a 64-character name is hashed as a label value too": {
			task: a("a", 64),
			want: safeNameSet{a("a", 48) + "-ffe054fe7a-sbx", a("a", 49) + "-ffe054fe7a-sa", a("a", 45) + "-ffe054fe7a-netpol", a("a", 52) + "-ffe054fe7a"},
		},
		"a long digit-leading label value keeps its leading digit": {
			task: "1" + a("a", 63),
			want: safeNameSet{a("a", 48) + "-7759cdaaa1-sbx", a("a", 49) + "-7759cdaaa1-sa", a("a", 45) + "-7759cdaaa1-netpol", "1" + a("a", 51) + "-7759cdaaa1"},
		},
		"a 253-character name, the longest task name, is cut to fit": {
			task: a("abcdefghi.", 25) + "abc",
			want: safeNameSet{
				"abcdefghi-abcdefghi-abcdefghi-abcdefghi-abcdefgh-d2606f601d-sbx",
				"abcdefghi-abcdefghi-abcdefghi-abcdefghi-abcdefghi-d2606f601d-sa",
				"abcdefghi-abcdefghi-abcdefghi-abcdefghi-abcde-d2606f601d-netpol",
				"abcdefghi-abcdefghi-abcdefghi-abcdefghi-abcdefghi-ab-d2606f601d",
			},
		},
		"a cut that ends on a dot leaves no trailing dash before the hash": {
			task: a("a", 47) + "." + a("b", 20),
			want: safeNameSet{a("a", 47) + "-e6a4a509ed-sbx", a("a", 47) + "-b-e6a4a509ed-sa", a("a", 45) + "-e6a4a509ed-netpol", a("a", 47) + "-bbbb-e6a4a509ed"},
		},
		"a cut that ends on a dash leaves no trailing dash before the hash": {
			task: a("a", 47) + "-" + a("b", 20),
			want: safeNameSet{a("a", 47) + "-cf1cd29a64-sbx", a("a", 47) + "-b-cf1cd29a64-sa", a("a", 45) + "-cf1cd29a64-netpol", a("a", 47) + "-bbbb-cf1cd29a64"},
		},
		"a run of dashes collapses to one": {
			task: a("a", 58) + "---b",
			want: safeNameSet{a("a", 48) + "-39e9242c79-sbx", a("a", 49) + "-39e9242c79-sa", a("a", 45) + "-39e9242c79-netpol", a("a", 58) + "---b"},
		},
		"a dot beside a dash collapses to one dash": {
			task: a("a", 40) + ".-" + a("b", 30),
			want: safeNameSet{
				a("a", 40) + "-bbbbbbb-8c221919b1-sbx",
				a("a", 40) + "-bbbbbbbb-8c221919b1-sa",
				a("a", 40) + "-bbbb-8c221919b1-netpol",
				a("a", 40) + "-" + a("b", 11) + "-8c221919b1",
			},
		},
		// Not task names (the API server refuses them), but a name must never
		// be what breaks a reconcile.
		"an upper-case, underscored name is lowered and dashed": {
			task: "Fix_Login",
			want: safeNameSet{"fix-login-2ec81b79c1-sbx", "fix-login-2ec81b79c1-sa", "fix-login-2ec81b79c1-netpol", "Fix_Login"},
		},
		"an empty name becomes t plus the hash of nothing": {
			task: "",
			want: safeNameSet{"t-e3b0c44298-sbx", "t-e3b0c44298-sa", "t-e3b0c44298-netpol", ""},
		},
		"a name of symbols only becomes t in the label value too": {
			task: "../..",
			want: safeNameSet{"t-0cfd1c96cb-sbx", "t-0cfd1c96cb-sa", "t-0cfd1c96cb-netpol", "t-0cfd1c96cb"},
		},
		"non-ASCII bytes become dashes": {
			task: "café-Ω",
			want: safeNameSet{"caf-35036d5852-sbx", "caf-35036d5852-sa", "caf-35036d5852-netpol", "caf-35036d5852"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := namesFor(test.task)
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("names of %q (-want +got):\n%s", test.task, diff)
			}
			if problems := namesProblems(got); len(problems) > 0 {
				t.Errorf("invalid names for %q: %v", test.task, problems)
			}
			if again := namesFor(test.task); again != got {
				t.Errorf("second derivation differs: %+v then %+v", got, again)
			}
		})
	}
}

// Every valid task name of every length, at every shape, gets valid names,
// and the plain form whenever it is itself valid.
func TestSafeNamesAreValidForEveryLength(t *testing.T) {
	shapes := map[string]func(n int) string{
		"letters":          func(n int) string { return strings.Repeat("a", n) },
		"digit-leading":    func(n int) string { return "7" + strings.Repeat("z", n-1) },
		"dotted every 5th": func(n int) string { return namesDotted(n, 5) },
		"dotted every 2nd": func(n int) string { return namesDotted(n, 2) },
		"digit-ending":     func(n int) string { return strings.Repeat("q", n-1) + "9" },
	}
	for shape, make := range shapes {
		t.Run(shape, func(t *testing.T) {
			for n := 1; n <= validation.DNS1123SubdomainMaxLength; n++ {
				task := make(n)
				if errs := validation.IsDNS1123Subdomain(task); len(errs) > 0 {
					t.Fatalf("test bug: %q is not a task name: %v", task, errs)
				}
				got := namesFor(task)
				if problems := namesProblems(got); len(problems) > 0 {
					t.Errorf("%d characters: %v", n, problems)
				}
				if plain := task + "-sbx"; len(validation.IsDNS1035Label(plain)) == 0 && got.Sandbox != plain {
					t.Errorf("%d characters: Sandbox name %q, want the plain %q", n, got.Sandbox, plain)
				}
				if n <= 63 && got.Label != task {
					t.Errorf("%d characters: label value %q, want the task name", n, got.Label)
				}
			}
		})
	}
}

// namesDotted is n characters of letters with a dot every step characters, never
// first or last.
func namesDotted(n, step int) string {
	b := []byte(strings.Repeat("d", n))
	for i := step; i < n-1; i += step {
		b[i] = '.'
	}
	return string(b)
}

// The hash is what keeps apart names the sanitizer merges: a.b and a-b,
// names that differ only past the cut, names of digits only. This generates
// a large set of such lookalikes and requires every child name to be unique.
func TestSafeNamesDoNotCollide(t *testing.T) {
	tasks := map[string]bool{}
	add := func(task string) {
		if errs := validation.IsDNS1123Subdomain(task); len(errs) > 0 {
			t.Fatalf("test bug: %q is not a task name: %v", task, errs)
		}
		tasks[task] = true
	}
	shared := strings.Repeat("p", 60)
	for i := range 30000 {
		add(fmt.Sprintf("%s%d", shared, i))                                             // same 60-character prefix, differing at the end
		add(fmt.Sprintf("%s.x%d", strings.Repeat("m", 70), i))                          // long and dotted
		add(fmt.Sprintf("%s%d%s", strings.Repeat("c", 30), i, strings.Repeat("e", 40))) // differing in the middle, past no cut
	}
	for i := range 16000 {
		add(fmt.Sprintf("a%d.b", i)) // dotted and dashed twins
		add(fmt.Sprintf("a%d-b", i))
		add(fmt.Sprintf("a.%d.b", i))
		add(fmt.Sprintf("a-%d-b", i))
		add(fmt.Sprintf("%d", i)) // digits only: every one sanitizes to "t"
		add(fmt.Sprintf("%dabc", i))
		add(fmt.Sprintf("%s%012d", strings.Repeat("abcdefghi.", 24), i)) // 253 characters
	}
	if len(tasks) < 200000 {
		t.Fatalf("test bug: only %d distinct task names", len(tasks))
	}

	// Validity is proved by the tests above and the fuzzer; this one is
	// about uniqueness, so it skips the regular expressions to stay fast.
	kinds := [4]string{"Sandbox", "ServiceAccount", "NetworkPolicy", "Label"}
	var seen [4]map[string]string
	for i := range seen {
		seen[i] = make(map[string]string, len(tasks))
	}
	for task := range tasks {
		n := namesFor(task)
		for i, name := range [4]string{n.Sandbox, n.ServiceAccount, n.NetworkPolicy, n.Label} {
			if other, dup := seen[i][name]; dup {
				t.Fatalf("%s name %q is shared by tasks %q and %q", kinds[i], name, other, task)
			}
			seen[i][name] = task
		}
	}
}
