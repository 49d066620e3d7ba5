package operator_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// stopTimeout is how long a SIGTERMed operator may take to exit before it
// is killed.
const stopTimeout = 20 * time.Second

// operatorProcess is one run of the caliban-operator binary.
type operatorProcess struct {
	name string
	// metricsAddr is where /metrics, /healthz and /readyz are served.
	metricsAddr string

	cmd    *exec.Cmd
	output *framework.SyncBuffer
	exited chan struct{}
	// state is set before exited is closed.
	state *os.ProcessState

	stopOnce sync.Once
}

// startOperator runs the operator binary configured like a Deployment
// would configure it, watching only namespace ns, with leader election off
// and metrics on a free loopback port. env entries ("NAME=value") are added
// or replace those defaults. The process is stopped with SIGTERM (SIGKILL
// after 20 s) when the test ends, and its output is shown if the test
// failed.
func startOperator(t *testing.T, name, ns string, env ...string) *operatorProcess {
	t.Helper()
	// The free port can be taken (by any outgoing connection's ephemeral
	// port) before the operator binds it. The operator then exits at once
	// naming the address: try another port, rather than fail the test on
	// the machine's luck.
	for attempt := 1; ; attempt++ {
		p := launchOperator(t, name, fmt.Sprintf("127.0.0.1:%d", freePort(t)), ns, env...)
		if !p.lostItsPort() || attempt == 3 {
			return p
		}
		t.Logf("operator %s: metrics address %s was taken meanwhile; trying another port", name, p.metricsAddr)
	}
}

// lostItsPort waits until the operator listens on its metrics address, and
// reports whether it exited instead because the address was in use.
func (p *operatorProcess) lostItsPort() bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return strings.Contains(p.output.String(), "address already in use")
		default:
		}
		if c, err := net.DialTimeout("tcp", p.metricsAddr, time.Second); err == nil {
			_ = c.Close()
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func launchOperator(t *testing.T, name, metricsAddr, ns string, env ...string) *operatorProcess {
	t.Helper()
	bin := operatorBinary(t)
	p := &operatorProcess{
		name:        name,
		metricsAddr: metricsAddr,
		output:      &framework.SyncBuffer{},
		exited:      make(chan struct{}),
	}
	vars := []string{
		"KUBECONFIG=" + cluster.Kubeconfig,
		"CALIBAN_METRICS_BIND_ADDRESS=" + p.metricsAddr,
		"CALIBAN_LEADER_ELECTION=false",
		"CALIBAN_WATCH_NAMESPACE=" + ns,
		"CALIBAN_LOG_VERBOSITY=4",
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = framework.OperatorEnv(append(vars, env...)...)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	// A test binary that dies without cleaning up takes the operator with
	// it, so no process is left behind.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SHOW_OPERATOR_OUTPUT") != "" {
			t.Logf("output of operator %s (pid %d):\n%s", p.name, p.cmd.Process.Pid, p.output.String())
			if trouble := kwokTrouble(); trouble != "" {
				t.Logf("kwok-controller (the Sandbox stand-in) reported:\n%s", trouble)
			}
		}
	})
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Stop sends SIGTERM, waits for the exit (SIGKILL after stopTimeout) and
// returns the exit code, -1 when the process died of a signal. Calling it
// again returns the first result.
func (p *operatorProcess) Stop(t testing.TB) int {
	t.Helper()
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			t.Errorf("operator %s did not exit within %s of SIGTERM; killing it", p.name, stopTimeout)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	<-p.exited
	return p.state.ExitCode()
}

// Kill sends SIGKILL and waits for the process to die.
func (p *operatorProcess) Kill() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	<-p.exited
}

// Output is everything the process wrote so far.
func (p *operatorProcess) Output() string { return p.output.String() }

// Get fetches a path of the metrics server.
func (p *operatorProcess) Get(path string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.metricsAddr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Metrics scrapes /metrics.
func (p *operatorProcess) Metrics() (metrics, error) {
	code, body, err := p.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %s", code, body)
	}
	return parseMetrics(body)
}

// waitReady polls /readyz until it answers 200.
func (p *operatorProcess) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		select {
		case <-p.exited:
			return fmt.Errorf("operator %s exited: %v", p.name, p.state)
		default:
		}
		code, body, err := p.Get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
}

// freePort asks the kernel for a free loopback port that this test binary
// has not handed out before: parallel tests must not get the same one. Any
// other process could still take it before the operator binds it; the
// operator would then exit naming CALIBAN_METRICS_BIND_ADDRESS, and the
// start is tried again (startOperator, runOperatorToExit).
func freePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// runOperatorToExit runs the binary with env (added to the defaults of
// startOperator) and waits up to timeout for it to exit on its own.
func runOperatorToExit(t testing.TB, timeout time.Duration, env ...string) (code int, stdout, stderr string, err error) {
	t.Helper()
	// As in startOperator: a metrics port taken meanwhile is the machine's
	// luck, not the test's answer.
	for attempt := 1; ; attempt++ {
		code, stdout, stderr, err = runOperatorOnce(t, timeout, env...)
		if err != nil || attempt == 3 || !strings.Contains(stderr, "CALIBAN_METRICS_BIND_ADDRESS 127.0.0.1:") ||
			!strings.Contains(stderr, "address already in use") {
			return code, stdout, stderr, err
		}
	}
}

func runOperatorOnce(t testing.TB, timeout time.Duration, env ...string) (code int, stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(operatorBinary(t))
	cmd.Env = framework.OperatorEnv(append([]string{
		"KUBECONFIG=" + cluster.Kubeconfig,
		fmt.Sprintf("CALIBAN_METRICS_BIND_ADDRESS=127.0.0.1:%d", freePort(t)),
		"CALIBAN_LEADER_ELECTION=false",
	}, env...)...)
	var out, errOut framework.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, "", "", err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return 0, out.String(), errOut.String(), errors.New("the operator did not exit on its own within " + timeout.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String(), nil
}

// kwokTrouble is the tail of what the kwok controller, which plays
// agent-sandbox, logged above INFO or about retries: a Sandbox that never
// turns Ready is usually explained there.
func kwokTrouble() string {
	data, err := os.ReadFile(filepath.Join(cluster.LogsDir, "kwok-controller.log"))
	if err != nil {
		return ""
	}
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && (!strings.Contains(line, `"level":"INFO"`) || strings.Contains(line, "retry")) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
