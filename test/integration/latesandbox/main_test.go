// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package latesandbox_test runs the real caliban-operator binary against a
// cluster that does not serve agent-sandbox's Sandbox API when the operator
// starts (test/framework's Options.WithoutSandbox), then installs it: the
// operator must start anyway, keep tasks waiting in Provisioning, and pick
// the API up without a restart.
//
// The package has a cluster of its own because installing the Sandbox CRD
// changes the cluster for every test in it.
package latesandbox_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

var cluster *framework.Cluster

// build is the operator binary, built once while the cluster starts.
var build *framework.OperatorBuild

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, &cluster, buildOperator, framework.Options{WithoutSandbox: true})
}

// buildOperator starts `go build ./cmd/caliban-operator` into a temporary
// directory and returns the teardown that removes it.
func buildOperator() (func(), error) {
	var err error
	if build, err = framework.StartOperatorBuild("caliban-operator-it-"); err != nil {
		return nil, err
	}
	return build.Teardown, nil
}

// operatorProcess is one run of the operator binary.
type operatorProcess struct {
	metricsAddr string
	cmd         *exec.Cmd
	output      *framework.SyncBuffer
	exited      chan struct{}
	state       *os.ProcessState
}

// startOperator runs the operator binary as its Deployment would, watching
// only namespace ns, without leader election, metrics on a free loopback
// port; env entries ("NAME=value") are added. It is stopped with SIGTERM
// (SIGKILL after 20 s) when the test ends; its output is shown if the test
// failed or SHOW_OPERATOR_OUTPUT is set.
func startOperator(t *testing.T, ns string, env ...string) *operatorProcess {
	t.Helper()
	binary := build.Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &operatorProcess{metricsAddr: ln.Addr().String(), output: &framework.SyncBuffer{}, exited: make(chan struct{})}
	_ = ln.Close()

	var vars []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CALIBAN_") || strings.HasPrefix(name, "CALIBAND_") ||
			name == "POD_NAME" || name == "CONTROLLER_POD_NAME" || name == "HOSTNAME" || name == "KUBECONFIG" {
			continue
		}
		vars = append(vars, kv)
	}
	p.cmd = exec.Command(binary)
	p.cmd.Env = append(append(vars,
		"KUBECONFIG="+cluster.Kubeconfig,
		"CALIBAN_METRICS_BIND_ADDRESS="+p.metricsAddr,
		"CALIBAN_LEADER_ELECTION=false",
		"CALIBAN_WATCH_NAMESPACE="+ns,
		"CALIBAN_LOG_VERBOSITY=4",
	), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SHOW_OPERATOR_OUTPUT") != "" {
			t.Logf("output of the operator (pid %d):\n%s", p.cmd.Process.Pid, p.output.String())
		}
	})
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("the operator did not exit within 20 s of SIGTERM; killing it")
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// running reports an error if the process has exited.
func (p *operatorProcess) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("the operator exited (%v); its output:\n%s", p.state, p.output.String())
	default:
		return nil
	}
}

// get fetches a path of the metrics server.
func (p *operatorProcess) get(path string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.metricsAddr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric sums the samples of a metric whose labels include every
// `name="value"` pair in labels, from a scrape of /metrics.
func (p *operatorProcess) metric(name string, labels ...string) (float64, error) {
	code, body, err := p.get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %d %s", code, body)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
