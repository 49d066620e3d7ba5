// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench is `make bench`: it measures the operator on a fresh
// kwokctl cluster of the test bed and writes the report, a plot and the
// operator's profiles to test/bench/results/ (see package harness for what
// is measured). It exits non-zero only when something broke, never because
// of a number.
//
// Environment:
//
//	BENCH_AGENT_SANDBOX    "real" sends the burst through agent-sandbox's own
//	                       controller (v1.0.3, real pods on kwok nodes) and
//	                       reports the stages of each task's start from its
//	                       objects' timestamps, burst only; "warm" does
//	                       the same with warm pools: agent-sandbox's bare
//	                       claims on a full pool, then tasks of a Workspace
//	                       whose pool is full; unset or "stand-in" is the
//	                       kwok Stage that plays it
//	BENCH_AGENT_SANDBOX_ARGS  more flags for agent-sandbox's controller
//	                       (with real or warm), split at spaces
//	BENCH_N                tasks in the burst (default 1000; 300 with
//	                       BENCH_AGENT_SANDBOX=real, 100 with warm)
//	BENCH_PACED            tasks of the paced phase (default 300)
//	BENCH_PACED_RATE       their arrival rate per second (default 50)
//	BENCH_RESULTS_DIR      where the results go (default test/bench/results)
//	BENCH_OPERATOR_BINARY  the operator to run (default bin/caliban-operator,
//	                       which `make bench` builds)
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/caliban-ai/caliban-operator/test/bench/harness"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	cfg := harness.Config{
		OperatorBinary: filepath.Join(root, "bin", "caliban-operator"),
		ResultsDir:     filepath.Join(root, "test", "bench", "results"),
	}
	switch v := os.Getenv("BENCH_AGENT_SANDBOX"); v {
	case "", "stand-in":
	case "real":
		cfg.RealAgentSandbox = true
	case "warm":
		cfg.Warm = true
	default:
		return fmt.Errorf("BENCH_AGENT_SANDBOX %q is none of \"real\", \"warm\" and \"stand-in\"", v)
	}
	cfg.AgentSandboxArgs = strings.Fields(os.Getenv("BENCH_AGENT_SANDBOX_ARGS"))
	if len(cfg.AgentSandboxArgs) > 0 && !cfg.RealAgentSandbox && !cfg.Warm {
		return fmt.Errorf("BENCH_AGENT_SANDBOX_ARGS %q needs BENCH_AGENT_SANDBOX=real or warm: the stand-in runs no agent-sandbox controller", os.Getenv("BENCH_AGENT_SANDBOX_ARGS"))
	}
	if cfg.N, err = intEnv("BENCH_N"); err != nil {
		return err
	}
	if cfg.Paced, err = intEnv("BENCH_PACED"); err != nil {
		return err
	}
	if v := os.Getenv("BENCH_PACED_RATE"); v != "" {
		if cfg.PacedRate, err = strconv.ParseFloat(v, 64); err != nil || cfg.PacedRate <= 0 || math.IsInf(cfg.PacedRate, 0) {
			return fmt.Errorf("BENCH_PACED_RATE %q is not a positive number", v)
		}
	}
	if v := os.Getenv("BENCH_RESULTS_DIR"); v != "" {
		cfg.ResultsDir = v
	}
	if v := os.Getenv("BENCH_OPERATOR_BINARY"); v != "" {
		cfg.OperatorBinary = v
	}

	// An interrupted run still stops its operator and deletes its cluster.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := harness.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(res.Markdown)
	fmt.Fprintf(os.Stderr, "wrote %s, %s and %s\n", res.Report, res.Plot, res.Latest)
	for _, p := range res.Profiles {
		fmt.Fprintf(os.Stderr, "profile %s (go tool pprof -top %s)\n", p, p)
	}
	return nil
}

// intEnv reads a positive integer; unset or empty means 0, the default.
func intEnv(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive integer", name, v)
	}
	return n, nil
}
