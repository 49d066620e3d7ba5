// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"os"
	"strings"
)

// OperatorEnv is this process's environment without any operator setting
// (OpenTelemetry's OTEL_* included), pod identity or KUBECONFIG it may
// carry, plus vars (a later entry
// replaces an earlier one of the same name): the environment to start an
// operator binary with, so that what a developer exported never leaks into
// a test's or the benchmark's operator.
func OperatorEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "CALIBAN_"), strings.HasPrefix(name, "CALIBAND_"), strings.HasPrefix(name, "OTEL_"),
			name == "POD_NAME", name == "CONTROLLER_POD_NAME", name == "HOSTNAME", name == "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	index := map[string]int{}
	for _, kv := range vars {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			env[i] = kv
			continue
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	return env
}
