// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// floorNamespace holds the bare client's tasks, apart from the operator's.
const floorNamespace = "bench-floor"

// floorResult is the bare client's burst, measured like the operator's.
type floorResult struct {
	tasks          phaseResult
	apf            totals
	readyToRunning []time.Duration
	// pacedReadyToRunning is Sandbox Ready → Running of tasks arriving
	// at the paced phase's rate after the burst.
	pacedReadyToRunning []time.Duration
	// synced is start → caches synced over the tasks the operator's cold
	// start saw, and host the machine's CPU in that time.
	synced time.Duration
	host   hostShare
	// burstHost is the machine's CPU during the burst: the bare client's
	// own, and the apiserver's, whose CPU per task says whether the machine
	// ran at the speed it did for the operator's burst.
	burstHost hostShare
	// idleRSS is the bare client's resident set before its burst, as the
	// operator's is read: its binary's pages and caches over the tasks
	// the operator's cold start saw.
	idleRSS float64
	// binarySize is the bare client's binary, in MB.
	binarySize float64
}

// buildFloor compiles the bare client (test/bench/floor) into dir.
func buildFloor(ctx context.Context, dir string) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, floorKey)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/bench/floor")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the bare client: %w\n%s", err, out)
	}
	return bin, nil
}

// floor runs a burst of N tasks, then Paced more at PacedRate, in
// floorNamespace, taken to Running by the bare client instead of the
// operator (none runs by then), on the same cluster, with the operator's
// identity. Its start over the tasks the operator's cold start saw, its
// CPU per task of the burst, and its Sandbox Ready → Running at the paced
// rate are the floors the operator's are read against.
func (b *bench) floor(ctx context.Context, kubeconfig string, res *Result) error {
	cfg := b.cfg
	logFile, err := os.Create(filepath.Join(b.tmp, "floor.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(ctx, b.floorBinary, "-kubeconfig", kubeconfig, "-namespace", floorNamespace)
	cmd.Stderr = logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopTimeout
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	hostStart, err := b.hostCPU()
	if err != nil {
		return err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	// An early exit ends the phase at once rather than at RunningTimeout.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopping := make(chan struct{})
	exited := make(chan error, 1)
	synced := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "synced" {
				close(synced)
			}
		}
		err := cmd.Wait()
		select {
		case <-stopping:
		default:
			cancel(fmt.Errorf("the bare client exited unasked (%v); its log: %s", err, logFile.Name()))
		}
		exited <- err
	}()
	stop := func() error {
		close(stopping)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			return fmt.Errorf("the bare client did not exit within %s of SIGTERM", stopTimeout)
		}
	}
	fail := func(err error) error {
		_ = stop()
		return fmt.Errorf("%w (bare client's log: %s)", err, logFile.Name())
	}
	select {
	case <-synced:
		res.floor.synced = time.Since(started)
		hostSynced, err := b.hostCPU()
		if err != nil {
			return fail(err)
		}
		res.floor.host = hostDelta(hostStart, hostSynced, res.floor.synced)
	case err := <-exited:
		return fmt.Errorf("the bare client exited before its caches synced: %v (log: %s)", err, logFile.Name())
	case <-time.After(5 * time.Minute):
		return fail(errors.New("the bare client's caches did not sync within 5 minutes"))
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	}

	obsCtx, cancelObs := context.WithCancel(ctx)
	defer cancelObs()
	obs, err := b.observe(obsCtx, floorNamespace)
	if err != nil {
		return fail(err)
	}
	apfBefore, err := b.apiserverFlows(ctx)
	if err != nil {
		return fail(err)
	}
	hostBefore, err := b.hostCPU()
	if err != nil {
		return fail(err)
	}
	if res.floor.idleRSS, err = procStatusMiB(cmd.Process.Pid, "VmRSS"); err != nil {
		return fail(err)
	}
	if res.floor.binarySize, err = fileMB(b.floorBinary); err != nil {
		return fail(err)
	}
	burstStart := time.Now()
	names := taskNames("f", cfg.N)
	sent, err := b.createTasks(ctx, floorNamespace, names, float64(cfg.N)/cfg.BurstSpread.Seconds(), cfg.CreateConcurrency)
	if err != nil {
		return fail(err)
	}
	if err := obs.waitRunning(ctx, b, names, cfg.RunningTimeout); err != nil {
		return fail(err)
	}
	running := obs.runningAt(names)
	b.logf("  all %d Running %s after the first create", cfg.N, slices.MaxFunc(running, time.Time.Compare).Sub(sent[0]).Round(time.Millisecond))
	// Its last Events follow the last Running; the operator's interval
	// also ends quietFor after its last work.
	select {
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	case <-time.After(quietFor):
	}
	hostAfter, err := b.hostCPU()
	if err != nil {
		return fail(err)
	}
	res.floor.burstHost = hostDelta(hostBefore, hostAfter, time.Since(burstStart))
	apfAfter, err := b.apiserverFlows(ctx)
	if err != nil {
		return fail(err)
	}
	paced := taskNames("fp", cfg.Paced)
	if _, err := b.createTasks(ctx, floorNamespace, paced, cfg.PacedRate, cfg.CreateConcurrency); err != nil {
		return fail(err)
	}
	if err := obs.waitRunning(ctx, b, paced, cfg.RunningTimeout); err != nil {
		return fail(err)
	}
	if err := stop(); err != nil {
		return fmt.Errorf("the bare client: %w (log: %s)", err, logFile.Name())
	}
	res.floor.tasks = phaseResult{names: names, sent: sent, running: running}
	res.floor.apf = b.totals(apfBefore, apfAfter)
	res.floor.readyToRunning = obs.readyToRunning(names)
	res.floor.pacedReadyToRunning = obs.readyToRunning(paced)
	return nil
}
