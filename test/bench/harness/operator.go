// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// The kernel fixes it at 100 on every architecture Go runs Linux on, and
// reading sysconf(_SC_CLK_TCK) would need cgo.
const clockTicks = 100

// stopTimeout is how long a SIGTERMed operator may take to let its syncs in
// flight finish and release its lease before it is killed.
const stopTimeout = 30 * time.Second

// operatorProcess is one run of the caliban-operator binary, configured as
// its Deployment is except for what running outside a pod requires.
type operatorProcess struct {
	*framework.Operator
	stopping chan struct{}
	stopOnce sync.Once
}

// startOperator runs bin with the environment stripped of every operator
// setting the caller's shell might carry, plus env, with metrics and pprof
// on free loopback ports. Its output goes to logPath, and the last lines
// are kept for error messages.
func startOperator(name, bin, logPath string, env ...string) (*operatorProcess, error) {
	op, err := framework.StartOperator(framework.OperatorOptions{
		Name: name, Binary: bin, Env: env,
		Pprof: true, LogPath: logPath, KeepLines: 40,
	})
	if err != nil {
		return nil, err
	}
	return &operatorProcess{Operator: op, stopping: make(chan struct{})}, nil
}

// watchExit cancels ctx when the process exits before Stop was called: the
// run cannot go on without its operator.
func (p *operatorProcess) watchExit(cancel context.CancelCauseFunc) {
	go func() {
		select {
		case <-p.stopping:
		case <-p.Done():
			select {
			case <-p.stopping:
			default:
				cancel(fmt.Errorf("operator %s exited on its own (%v); its last output:\n%s", p.Name, p.ProcessState(), p.Output()))
			}
		}
	}()
}

// Stop sends SIGTERM and waits for the exit, killing the process after
// stopTimeout. It returns an error when the process had to be killed or
// exited with a failure.
func (p *operatorProcess) Stop() error {
	p.stopOnce.Do(func() { close(p.stopping) })
	if err := p.Operator.Stop(stopTimeout); err != nil {
		return fmt.Errorf("%w; its last output:\n%s", err, p.Output())
	}
	return nil
}

// get fetches a path of the metrics server (or, with pprof, of the
// profiling server).
func (p *operatorProcess) get(ctx context.Context, addr, path string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// metrics scrapes the operator's /metrics.
func (p *operatorProcess) metrics(ctx context.Context) (samples, error) {
	code, body, err := p.get(ctx, p.MetricsAddr, "/metrics", 10*time.Second)
	if err != nil {
		return samples{}, fmt.Errorf("operator %s /metrics: %w", p.Name, err)
	}
	if code != http.StatusOK {
		return samples{}, fmt.Errorf("operator %s /metrics: %d", p.Name, code)
	}
	return parseMetrics(string(body))
}

// cpu is the CPU time the process has used, user and system.
func (p *operatorProcess) cpu() (time.Duration, error) { return processCPU(p.Pid()) }

// processCPU is a process's CPU time, user and system, from
// /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its closing one. utime and stime are fields
	// 14 and 15, so the 12th and 13th after it.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// peakRSS is the process's high-water resident set (VmHWM), in MiB.
func (p *operatorProcess) peakRSS() (float64, error) { return p.status("VmHWM") }

// rss is the process's resident set now (VmRSS), in MiB.
func (p *operatorProcess) rss() (float64, error) { return p.status("VmRSS") }

// status reads a size in kB from the operator's /proc/<pid>/status, in MiB.
func (p *operatorProcess) status(field string) (float64, error) { return procStatusMiB(p.Pid(), field) }

// fileMB is a file's size in MB (10^6 bytes), as a binary's size is
// usually given.
func fileMB(path string) (float64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return float64(fi.Size()) / 1e6, nil
}

// procStatusMiB reads a size in kB from /proc/<pid>/status, in MiB.
func procStatusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// profile saves /debug/pprof/<name> (with query) to path. The pprof
// endpoint is optional: an operator without it answers 404 or refuses the
// connection, and the benchmark goes on without the profile.
func (p *operatorProcess) profile(ctx context.Context, name, query, path string, timeout time.Duration) error {
	url := "/debug/pprof/" + name
	if query != "" {
		url += "?" + query
	}
	code, body, err := p.get(ctx, p.PprofAddr, url, timeout)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, code)
	}
	return os.WriteFile(path, body, 0o644)
}

// profileFromStart waits up to 10 s for the pprof endpoint to answer, then
// saves a CPU profile of the next secs seconds to path.
func (p *operatorProcess) profileFromStart(ctx context.Context, secs int, path string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err := p.get(ctx, p.PprofAddr, "/debug/pprof/", time.Second)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pprof endpoint not answering: code %d, %v", code, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond):
		}
	}
	d := time.Duration(secs) * time.Second
	return p.profile(ctx, "profile", "seconds="+strconv.Itoa(secs), path, d+30*time.Second)
}
