// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kwokctl can stop and start a whole cluster but not one component of it,
// so the fault tests do it themselves, the way kwokctl's binary runtime runs
// a component: its command line and working directory, its output appended
// to logs/<component>.log, its pid in pids/<component>.pid (which is what
// `kwokctl delete cluster` kills).

// Component names as kwokctl's binary runtime knows them.
const (
	KubeAPIServer  = "kube-apiserver"
	Etcd           = "etcd"
	KwokController = "kwok-controller"
)

// stoppedComponent is what StartComponent needs to run a component again.
type stoppedComponent struct {
	argv []string
	dir  string
}

// StopComponent sends SIGTERM to one of the cluster's components and waits
// for it to exit; after grace it sends SIGKILL. (kube-apiserver keeps
// serving open watches for up to a minute after SIGTERM; a short grace
// makes the outage a test wants without waiting for that.) It returns how
// long the process took to die.
func (c *Cluster) StopComponent(component string, grace time.Duration) (time.Duration, error) {
	pidFile := filepath.Join(c.clusterDir(), "pids", component+".pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("component %s: %w", component, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("component %s: pid file %s: %w", component, pidFile, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("component %s (pid %d) is not running: %w", component, pid, err)
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return 0, err
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")

	// Its port must not go to a cluster created while it is down.
	c.stoppedMu.Lock()
	if c.portsLock == nil {
		if c.portsLock, err = lockPorts(); err != nil {
			c.stoppedMu.Unlock()
			return 0, err
		}
	}
	c.stoppedMu.Unlock()

	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("component %s (pid %d): %w", component, pid, err)
	}
	killed := false
	for processAlive(pid) && !isZombie(pid) {
		if !killed && time.Since(start) > grace {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.stoppedMu.Lock()
	defer c.stoppedMu.Unlock()
	if c.stopped == nil {
		c.stopped = map[string]stoppedComponent{}
	}
	c.stopped[component] = stoppedComponent{argv: argv, dir: dir}
	return time.Since(start), nil
}

// StartComponent runs a component StopComponent stopped again, with the same
// command line, and waits until the apiserver answers /readyz.
func (c *Cluster) StartComponent(ctx context.Context, component string) error {
	c.stoppedMu.Lock()
	s, ok := c.stopped[component]
	delete(c.stopped, component)
	c.stoppedMu.Unlock()
	if !ok {
		return fmt.Errorf("component %s was not stopped by StopComponent", component)
	}
	logFile, err := os.OpenFile(filepath.Join(c.clusterDir(), "logs", component+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Like kwokctl's: a session of its own, so that it outlives the test
	// binary until `kwokctl delete cluster` (or the orphan reaper) kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", component, err)
	}
	go func() { _ = cmd.Wait() }() // reaps it when the cluster is deleted
	pidFile := filepath.Join(c.clusterDir(), "pids", component+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	err = c.WaitReady(ctx, 2*time.Minute)
	// Serving again, or given up on: either way other clusters may be
	// created once no component of this one is down.
	c.stoppedMu.Lock()
	if len(c.stopped) == 0 && c.portsLock != nil {
		_ = c.portsLock.Close()
		c.portsLock = nil
	}
	c.stoppedMu.Unlock()
	return err
}

// WaitReady waits until the apiserver answers /readyz with ok, which
// includes its connection to etcd.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the apiserver of %s is not ready after %s: %v", c.Name, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) clusterDir() string {
	return filepath.Join(workDir(), "clusters", c.Name)
}

// isZombie reports whether pid has exited but was not reaped yet: a
// component restarted by this process is its child until then.
func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}
