// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// OperatorOptions say how to run one operator process: what StartOperator
// starts, and what RunOperator does with it when the test ends.
type OperatorOptions struct {
	// Name names the process in messages.
	Name string
	// Binary is the operator binary: a build of this tree (OperatorBuild,
	// BuildOperator) or any other, such as an earlier release's.
	Binary string
	// Env is added to the environment stripped of the caller's operator
	// settings (OperatorEnv); a later entry replaces an earlier one.
	Env []string
	// MetricsAddr is where the process serves /metrics, /healthz and
	// /readyz (CALIBAN_METRICS_BIND_ADDRESS, which Env cannot override:
	// the Operator must know where to ask). Empty picks a free loopback
	// port.
	MetricsAddr string
	// Pprof serves /debug/pprof on a free loopback port of its own
	// (CALIBAN_PPROF_BIND_ADDRESS).
	Pprof bool
	// LogPath, when set, is a file created to receive everything the
	// process writes; it is closed when the process exits.
	LogPath string
	// KeepLines keeps only the last lines of the output in memory (Output,
	// Stdout, Stderr), all of it when 0: a benchmark's operator writes more
	// than is worth keeping, and has LogPath for the rest.
	KeepLines int

	// The rest is what RunOperator does when the test ends.

	// StopTimeout is how long the process has to exit after SIGTERM before
	// it is killed. Zero kills it at once, as a crash would: for a test
	// that never stops it on purpose.
	StopTimeout time.Duration
	// CheckStop is what that stop is held to.
	CheckStop StopCheck
	// ShowLines is how many of the last lines of output are logged when the
	// test failed or SHOW_OPERATOR_OUTPUT is set; 0 logs all of it.
	ShowLines int
	// FailOnPanic fails the test when the output shows a panic or a fatal
	// runtime error, which is often why a test did not converge, and could
	// otherwise pass unnoticed when the process was restarted.
	FailOnPanic bool
	// NoWait returns as soon as the process runs, rather than once it
	// serves its metrics address; a port taken meanwhile then shows as an
	// exit instead of being retried on another. For a caller that kills
	// processes on a clock of its own.
	NoWait bool
}

// StopCheck is what RunOperator holds the stop at the test's end to.
type StopCheck int

const (
	// AnyStop does not check how the process ended.
	AnyStop StopCheck = iota
	// StopInTime fails the test when the process had to be killed after
	// StopTimeout.
	StopInTime
	// StopCleanly fails it, too, when the process exited non-zero.
	StopCleanly
)

// ErrStopTimedOut is in Stop's error when the process did not exit in time
// after SIGTERM and was killed.
var ErrStopTimedOut = errors.New("did not exit in time after SIGTERM and was killed")

// Operator is one run of an operator binary as a process.
type Operator struct {
	Name string
	// Binary is the file it runs.
	Binary string
	// MetricsAddr serves /metrics, /healthz and /readyz.
	MetricsAddr string
	// PprofAddr serves /debug/pprof when OperatorOptions.Pprof asked for
	// it, and is empty otherwise.
	PprofAddr string
	// Started is when the process was started.
	Started time.Time

	cmd                    *exec.Cmd
	output, stdout, stderr capture
	log                    *os.File
	exited                 chan struct{}
	// waitErr is why the process ended, set before exited is closed.
	waitErr error
	once    sync.Once
}

// StartOperator runs opts.Binary with the environment stripped of the
// caller's operator settings (OperatorEnv) plus opts.Env, its metrics (and
// pprof) on its addresses. Its output is kept in memory, and in
// opts.LogPath. The process dies with the calling one. StartOperator does
// not wait for it to serve, nor stop it: RunOperator does both for a test.
func StartOperator(opts OperatorOptions) (*Operator, error) {
	p := &Operator{
		Name:        opts.Name,
		Binary:      opts.Binary,
		MetricsAddr: opts.MetricsAddr,
		output:      newCapture(opts.KeepLines),
		stdout:      newCapture(opts.KeepLines),
		stderr:      newCapture(opts.KeepLines),
		exited:      make(chan struct{}),
	}
	var err error
	if p.MetricsAddr == "" {
		if p.MetricsAddr, err = FreeLoopbackAddr(); err != nil {
			return nil, err
		}
	}
	vars := append(append([]string{}, opts.Env...), "CALIBAN_METRICS_BIND_ADDRESS="+p.MetricsAddr)
	if opts.Pprof {
		if p.PprofAddr, err = FreeLoopbackAddr(); err != nil {
			return nil, err
		}
		vars = append(vars, "CALIBAN_PPROF_BIND_ADDRESS="+p.PprofAddr)
	}
	stdout, stderr := []io.Writer{p.output, p.stdout}, []io.Writer{p.output, p.stderr}
	if opts.LogPath != "" {
		if p.log, err = os.Create(opts.LogPath); err != nil {
			return nil, err
		}
		stdout, stderr = append(stdout, p.log), append(stderr, p.log)
	}
	p.cmd = exec.Command(opts.Binary)
	p.cmd.Env = OperatorEnv(vars...)
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(stdout...), io.MultiWriter(stderr...)
	// A test binary (or benchmark) that dies without cleaning up takes the
	// operator with it, so no process is left writing to a cluster that
	// is being deleted.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.Started = time.Now()
	if err := p.cmd.Start(); err != nil {
		if p.log != nil {
			_ = p.log.Close()
		}
		return nil, fmt.Errorf("starting operator %s (%s): %w", opts.Name, opts.Binary, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		if p.log != nil {
			_ = p.log.Close()
		}
		close(p.exited)
	}()
	return p, nil
}

// RunOperator is StartOperator for a test. Unless opts.NoWait, it returns
// once the process serves its metrics address (or has exited, or 30 s
// passed); a free port it picked can be taken by anyone before the
// operator binds it, and the operator then exits naming the address: that
// is the machine's luck, not the test's answer, so it tries another port
// (three times at most). When the test ends the process is stopped as
// opts say, and its output shown if the test failed.
//
// It never ends the test itself, so that it can be called from a goroutine
// other than the test's; callers end it on the error.
func RunOperator(t testing.TB, opts OperatorOptions) (*Operator, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := StartOperator(opts)
		if err != nil {
			return nil, err
		}
		if !opts.NoWait {
			err := p.WaitServing(30 * time.Second)
			if err != nil && opts.MetricsAddr == "" && attempt < 3 && p.Exited() && strings.Contains(p.Output(), "address already in use") {
				t.Logf("operator %s: an address it was given (%s) was taken meanwhile; trying other ports", opts.Name, p.MetricsAddr)
				continue
			}
		}
		t.Cleanup(func() { p.endOfTest(t, opts) })
		return p, nil
	}
}

// NamespaceOperatorEnv is the environment of an operator that a test runs
// for namespace ns of the cluster alone, as the Deployment's
// single-namespace variant runs: through the cluster's admin kubeconfig,
// without leader election (each test runs a process of its own, with no
// lease to contend for), with verbose logs for a failing test to show.
// env is added last, replacing any of these.
func (c *Cluster) NamespaceOperatorEnv(ns string, env ...string) []string {
	return append([]string{
		"KUBECONFIG=" + c.Kubeconfig,
		"CALIBAN_LEADER_ELECTION=false",
		"CALIBAN_WATCH_NAMESPACE=" + ns,
		"CALIBAN_LOG_VERBOSITY=4",
	}, env...)
}

// endOfTest stops the process as opts say, holds the stop and the output
// to them, and shows the output if the test failed.
func (p *Operator) endOfTest(t testing.TB, opts OperatorOptions) {
	if opts.StopTimeout == 0 {
		p.Kill()
	} else if err := p.Stop(opts.StopTimeout); err != nil {
		if opts.CheckStop == StopCleanly || opts.CheckStop == StopInTime && errors.Is(err, ErrStopTimedOut) {
			t.Error(err)
		}
	}
	out := p.Output()
	if opts.FailOnPanic {
		for _, sign := range []string{"panic:", "fatal error:"} {
			if i := strings.Index(out, sign); i >= 0 {
				t.Errorf("operator %s wrote %q:\n%s", p.Name, sign, LastLines(out[i:], 30))
			}
		}
	}
	if t.Failed() || os.Getenv("SHOW_OPERATOR_OUTPUT") != "" {
		what := "output"
		if opts.ShowLines > 0 {
			what = fmt.Sprintf("last %d lines of output", opts.ShowLines)
			out = LastLines(out, opts.ShowLines)
		}
		t.Logf("%s of operator %s (pid %d, %s):\n%s", what, p.Name, p.Pid(), p.Binary, out)
	}
}

// Pid is the process's id.
func (p *Operator) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process wrote so far, stdout and stderr (their
// last lines with KeepLines).
func (p *Operator) Output() string { return p.output.String() }

// Stdout is what the process wrote to its stdout so far.
func (p *Operator) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote to its stderr so far: where it names a
// setting it refuses.
func (p *Operator) Stderr() string { return p.stderr.String() }

// Kill sends SIGKILL and waits for the process to die: a crash, with no
// chance to release the lease or finish a write.
func (p *Operator) Kill() {
	p.once.Do(func() { _ = p.cmd.Process.Kill() })
	<-p.exited
}

// Stop sends SIGTERM and waits up to timeout for the exit, then kills. It
// reports an error when the process had to be killed (ErrStopTimedOut) or
// failed. After a Stop or Kill it only waits for the exit.
func (p *Operator) Stop(timeout time.Duration) error {
	var err error
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
			err = fmt.Errorf("operator %s %w (within %s)", p.Name, ErrStopTimedOut, timeout)
		}
	})
	<-p.exited
	if err == nil && p.waitErr != nil {
		err = fmt.Errorf("operator %s exited with %v", p.Name, p.waitErr)
	}
	return err
}

// Wait waits up to timeout for the process to exit on its own, and returns
// its exit code. A process still running then is killed, with an error.
func (p *Operator) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
		return p.ExitCode(), nil
	case <-time.After(timeout):
		p.Kill()
		return p.ExitCode(), fmt.Errorf("operator %s did not exit on its own within %s", p.Name, timeout)
	}
}

// Done is closed when the process has ended.
func (p *Operator) Done() <-chan struct{} { return p.exited }

// Exited reports whether the process has ended.
func (p *Operator) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// ProcessState is how the process ended, nil while it runs.
func (p *Operator) ProcessState() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// ExitCode is the ended process's exit code: -1 while it runs or when a
// signal ended it.
func (p *Operator) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Running is nil while the process runs, and otherwise an error that says
// how it ended, with its output.
func (p *Operator) Running() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("operator %s exited (%v); its output:\n%s", p.Name, p.ProcessState(), p.Output())
}

// Get fetches a path of the metrics server: its status code and body, or
// the error of a process that does not answer.
func (p *Operator) Get(path string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.MetricsAddr + path)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Metrics scrapes the process's /metrics and parses it (see ParseMetrics
// for families).
func (p *Operator) Metrics(families ...string) (Metrics, error) {
	code, body, err := p.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %s", code, body)
	}
	return ParseMetrics(body, families...)
}

// WaitServing waits up to timeout until the process answers /healthz with
// 200, and reports why not when it exited first or the time ran out.
func (p *Operator) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.Running(); err != nil {
			return err
		}
		code, body, err := p.Get("/healthz")
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("/healthz: %d %s", code, body)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator %s does not serve %s within %s: %v", p.Name, p.MetricsAddr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreeLoopbackAddr is a loopback address whose port was free a moment ago
// and that this process has not handed out before: parallel tests must not
// get the same one. Any other process can still take it before the caller
// binds it.
func FreeLoopbackAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr, nil
		}
	}
}

var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// capture keeps what a process writes for a test to read.
type capture interface {
	io.Writer
	String() string
}

func newCapture(lines int) capture {
	if lines > 0 {
		return &tailBuffer{max: lines}
	}
	return &SyncBuffer{}
}

// SyncBuffer is a bytes.Buffer safe for a process's writers and a test's
// readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial string
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(b.partial + string(p)))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	b.partial = ""
	complete := strings.HasSuffix(string(p), "\n")
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if !complete && len(lines) > 0 {
		b.partial = lines[len(lines)-1]
		lines = lines[:len(lines)-1]
	}
	b.lines = append(b.lines, lines...)
	if len(b.lines) > b.max {
		b.lines = b.lines[len(b.lines)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(append(append([]string{}, b.lines...), b.partial), "\n")
}
