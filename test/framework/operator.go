package framework

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Operator is one run of the caliban-operator binary as a process: what
// the fault tests start, kill and start again.
type Operator struct {
	Name string
	// MetricsAddr serves /metrics, /healthz and /readyz.
	MetricsAddr string

	cmd    *exec.Cmd
	output *SyncBuffer
	exited chan struct{}
	// waitErr is why the process ended, set before exited is closed.
	waitErr error
	once    sync.Once
}

// StartOperator runs bin with the environment stripped of the caller's
// operator settings (OperatorEnv) plus env and its metrics on metricsAddr.
// Its output is kept in memory. The process dies with the test binary.
func StartOperator(name, bin, metricsAddr string, env ...string) (*Operator, error) {
	p := &Operator{Name: name, MetricsAddr: metricsAddr, output: &SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = OperatorEnv(append([]string{"CALIBAN_METRICS_BIND_ADDRESS=" + metricsAddr}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting operator %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Operator) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process wrote so far, stdout and stderr.
func (p *Operator) Output() string { return p.output.String() }

// Kill sends SIGKILL and waits for the process to die: a crash, with no
// chance to release the lease or finish a write.
func (p *Operator) Kill() {
	p.once.Do(func() { _ = p.cmd.Process.Kill() })
	<-p.exited
}

// Stop sends SIGTERM and waits up to timeout for the exit, then kills. It
// reports an error when the process had to be killed or failed.
func (p *Operator) Stop(timeout time.Duration) error {
	var err error
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
			err = fmt.Errorf("operator %s did not exit within %s of SIGTERM", p.Name, timeout)
		}
	})
	<-p.exited
	if err == nil && p.waitErr != nil {
		err = fmt.Errorf("operator %s exited with %v", p.Name, p.waitErr)
	}
	return err
}

// Readyz is the process's answer to GET /readyz: its status code and
// body, or the error of a process that does not answer.
func (p *Operator) Readyz() (int, string, error) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.MetricsAddr + "/readyz")
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
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	return ParseMetrics(string(body), families...)
}

// Exited reports whether the process has ended.
func (p *Operator) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// FreeLoopbackAddr is a loopback address whose port was free a moment ago.
func FreeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
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
