// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package golden compares a test's output with a file under testdata/, the
// way every golden test here does: UPDATE_GOLDEN=1 rewrites the file.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Compare compares got with testdata/<name> of the test's package;
// UPDATE_GOLDEN=1 rewrites the file instead.
func Compare(t testing.TB, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-golden +got); rerun with UPDATE_GOLDEN=1 if the change is intended:\n%s", file, diff)
	}
}
