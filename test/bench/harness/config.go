// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package harness is the benchmark behind `make bench`: on a fresh kwokctl
// cluster of the test bed it measures, in one run, the apiserver's own write
// ceiling, then the real operator binary (its default settings, its own
// ServiceAccount and RBAC) taking a burst and a paced stream of CalibanTasks
// to Running, its steady state under a forced resync, and its cold start.
// It reports numbers and never judges them: Run fails only when something
// breaks (the cluster, the operator, a task that never runs).
//
// With Config.RealAgentSandbox (BENCH_AGENT_SANDBOX=real) the Sandboxes are
// made Ready by agent-sandbox's own controller instead of the kwok Stage
// that stands in for it, with real pods, Services and volume claims on
// kwok nodes; that run takes only the burst and cuts each task's start
// into stages at the timestamps its objects carry (stages.go, real.go).
package harness

import (
	"io"
	"os"
	"time"
)

// Config says how large the run is and where it writes. The zero value of a
// field means its default (see Defaults).
type Config struct {
	// RealAgentSandbox (BENCH_AGENT_SANDBOX=real; unset or "stand-in" is
	// the default) sends the burst through agent-sandbox's own controller
	// and reports where each task's start spent its time. It runs only the
	// burst: the other phases would more than double a run of minutes and
	// measure nothing agent-sandbox changes.
	RealAgentSandbox bool
	// Warm (BENCH_AGENT_SANDBOX=warm) is RealAgentSandbox with agent-sandbox's
	// warm pools: bare claims on a full pool, then tasks of a Workspace
	// whose pool is full (warm.go).
	Warm bool
	// AgentSandboxArgs (BENCH_AGENT_SANDBOX_ARGS, split at spaces) are
	// more flags for agent-sandbox's controller, with RealAgentSandbox:
	// its own tuning, e.g. --sandbox-warm-pool-replenish-delay=10s.
	AgentSandboxArgs []string

	// N is the size of the burst: 1000 by default, 300 with
	// RealAgentSandbox, where a task costs a pod, a claim and a volume and
	// the burst takes minutes, 100 with Warm (and the pools' size).
	N int
	// BurstSpread is how long the burst's creates are spread over.
	BurstSpread time.Duration
	// CreateConcurrency is how many creates the burst has in flight.
	CreateConcurrency int

	// Paced tasks arrive at PacedRate per second after the burst.
	Paced     int
	PacedRate float64

	// CeilingDuration is how long each ceiling measurement runs;
	// CeilingConcurrency is the concurrent one's parallelism.
	CeilingDuration    time.Duration
	CeilingConcurrency int

	// ResyncSeconds is CALIBAN_RESYNC_SECONDS of the steady-state operator;
	// SteadyWindow is how long its steady state is measured.
	ResyncSeconds int
	SteadyWindow  time.Duration

	// CPUProfile is how long the CPU profile taken during the burst runs.
	CPUProfile time.Duration
	// ColdStartProfile is how long the cold start's CPU profile runs; by
	// default the larger of 10 s and a second per 250 tasks, longer than
	// the start on this machine.
	ColdStartProfile time.Duration

	// RunningTimeout bounds the wait for a phase's tasks to be Running.
	RunningTimeout time.Duration

	// OperatorBinary is the caliban-operator binary to run.
	OperatorBinary string
	// ResultsDir receives the report, the plot and the profiles.
	ResultsDir string
	// Log receives progress lines; nil means os.Stderr.
	Log io.Writer
}

// Defaults fills in the fields left zero: the sizes of `make bench`.
func (c Config) Defaults() Config {
	if c.Warm {
		c.RealAgentSandbox = true
	}
	if c.N <= 0 {
		c.N = 1000
		switch {
		case c.Warm:
			c.N = 100
		case c.RealAgentSandbox:
			c.N = 300
		}
	}
	if c.BurstSpread <= 0 {
		c.BurstSpread = 5 * time.Second
	}
	if c.CreateConcurrency <= 0 {
		c.CreateConcurrency = 16
	}
	if c.Paced <= 0 {
		c.Paced = 300
	}
	if c.PacedRate <= 0 {
		c.PacedRate = 50
	}
	if c.CeilingDuration <= 0 {
		c.CeilingDuration = 5 * time.Second
	}
	if c.CeilingConcurrency <= 0 {
		c.CeilingConcurrency = 32
	}
	if c.ResyncSeconds <= 0 {
		c.ResyncSeconds = 30
	}
	if c.SteadyWindow <= 0 {
		// Long enough that at least one resync falls inside, whatever the
		// phase of the informers' resync timer.
		c.SteadyWindow = time.Duration(c.ResyncSeconds) * time.Second * 3 / 2
	}
	if c.CPUProfile <= 0 {
		c.CPUProfile = 30 * time.Second
	}
	if c.ColdStartProfile <= 0 {
		c.ColdStartProfile = max(10*time.Second, time.Duration(c.N+c.Paced)*time.Second/250)
	}
	if c.RunningTimeout <= 0 {
		// 10 minutes per thousand tasks: far beyond any healthy run, so
		// only a stuck task reaches it.
		per := 10 * time.Minute * time.Duration(c.N+c.Paced) / 1000
		c.RunningTimeout = max(10*time.Minute, per)
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return c
}
