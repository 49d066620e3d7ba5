// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command run-local is `make run`: it runs the operator binary in the
// foreground against a cluster, and Ctrl-C stops it.
//
// LOCAL mode (KUBECONFIG unset or empty, or LOCAL=1): it starts the kwokctl
// cluster "caliban-local" with the test bed's CRDs and Sandbox stand-in
// (test/framework), applies manifests/samples into namespace "default",
// prints how to watch, and runs the operator against it. When the operator
// exits, for whatever reason, the cluster is deleted.
//
// KUBECONFIG mode: it server-side-applies manifests/crds to the cluster
// KUBECONFIG points at and runs the operator against it; it creates and
// deletes nothing else there.
//
// The operator is bin/caliban-operator, or CALIBAN_OPERATOR_BINARY when set.
// It gets this process's environment with CALIBAN_LEADER_ELECTION=false and
// CALIBAN_METRICS_BIND_ADDRESS=127.0.0.1:8080 unless those are set, and, in
// LOCAL mode, the cluster's KUBECONFIG. SIGINT, SIGTERM and SIGHUP are
// forwarded to it once each as they arrive; if it has not exited 30 seconds
// after the first, it is killed. The exit code is the operator's.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

const (
	// clusterName is the LOCAL-mode cluster. It must not start with the
	// integration tests' prefix (caliban-it-), whose clusters are reaped.
	clusterName = "caliban-local"
	// sampleNamespace receives manifests/samples in LOCAL mode.
	sampleNamespace = "default"
	// binaryEnv overrides the operator binary's path.
	binaryEnv = "CALIBAN_OPERATOR_BINARY"
	// stopGrace is how long the operator may take to stop after the first
	// signal before it is killed; its own shutdown grace is shorter.
	stopGrace = 30 * time.Second
)

// operatorDefaults are set for the operator unless the user's environment
// already has them (even empty): no lease namespace is needed outside a
// cluster, and the metrics endpoint stays on the loopback interface.
var operatorDefaults = []string{
	"CALIBAN_LEADER_ELECTION=false",
	"CALIBAN_METRICS_BIND_ADDRESS=127.0.0.1:8080",
}

func main() {
	os.Exit(run())
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "run-local: "+format+"\n", args...)
}

func run() int {
	// Signals are ours from the start: until the operator runs they cancel
	// start-up, which then cleans up; afterwards they are forwarded.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go watchParent(sigs)

	root, err := framework.RepoRoot()
	if err != nil {
		logf("%v", err)
		return 1
	}
	operator := operatorBinary(root, os.Getenv(binaryEnv))
	if _, err := os.Stat(operator); err != nil {
		logf("the operator binary is missing (%v): `make run` builds it with `go build -o bin/caliban-operator ./cmd/caliban-operator`; %s names another", err, binaryEnv)
		return 1
	}

	if localMode(os.Getenv("KUBECONFIG"), os.Getenv("LOCAL")) {
		return runLocal(root, operator, sigs)
	}
	return runAgainstKubeconfig(root, operator, sigs)
}

// runLocal is LOCAL mode.
func runLocal(root, operator string, sigs chan os.Signal) int {
	unlock, err := lockCluster()
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer unlock()

	start := time.Now()
	logf("starting kwokctl cluster %s (usually about ten seconds; Ctrl-C aborts)", clusterName)
	var cluster *framework.Cluster
	err = interruptible(sigs, func(ctx context.Context) error {
		var err error
		if cluster, err = framework.StartNamed(ctx, clusterName); err != nil {
			return err
		}
		samples, err := readSamples(filepath.Join(root, "manifests", "samples"))
		if err != nil {
			return err
		}
		if err := cluster.Apply(ctx, sampleNamespace, samples...); err != nil {
			return fmt.Errorf("applying manifests/samples: %w", err)
		}
		var names []string
		for _, o := range samples {
			names = append(names, o.GetKind()+"/"+o.GetName())
		}
		logf("applied manifests/samples into namespace %s: %s", sampleNamespace, strings.Join(names, ", "))
		return nil
	})
	// However the operator ends, and also when it never starts, the
	// cluster goes.
	defer deleteCluster(cluster, sigs)
	if err != nil {
		logf("%v", err)
		return 1
	}

	kwokctl := filepath.Join(root, "bin", "kwokctl")
	if wd, err := os.Getwd(); err == nil && wd == root {
		kwokctl = filepath.Join("bin", "kwokctl")
	}
	logf("cluster %s is up in %s\n"+
		"  kubeconfig:       %s\n"+
		"  cluster logs:     %s (deleted with the cluster)\n"+
		"  watch:            kubectl --kubeconfig %s get caliban -w\n"+
		"  or, no kubectl:   %s --name %s kubectl get caliban -w   (kwokctl downloads a kubectl when none is on PATH)\n"+
		"the operator's logs follow; Ctrl-C stops it and deletes the cluster",
		clusterName, time.Since(start).Round(time.Second), cluster.Kubeconfig, cluster.LogsDir,
		cluster.Kubeconfig, kwokctl, clusterName)

	return runOperator(operator, childEnv(os.Environ(), cluster.Kubeconfig), sigs)
}

// runAgainstKubeconfig is KUBECONFIG mode.
func runAgainstKubeconfig(root, operator string, sigs chan os.Signal) int {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		logf("loading KUBECONFIG: %v", err)
		return 1
	}
	where := cfg.Host
	if raw, err := loader.RawConfig(); err == nil && raw.CurrentContext != "" {
		where = fmt.Sprintf("context %s (%s)", raw.CurrentContext, cfg.Host)
	}
	cluster, err := framework.Connect(cfg)
	if err != nil {
		logf("%v", err)
		return 1
	}
	logf("installing manifests/crds into %s", where)
	if err := interruptible(sigs, func(ctx context.Context) error {
		return cluster.InstallCRDs(ctx, filepath.Join(root, "manifests", "crds"))
	}); err != nil {
		logf("%v", err)
		return 1
	}
	env := childEnv(os.Environ(), "")
	if v, _ := lookup(env, "CALIBAN_LEADER_ELECTION"); v == "false" {
		logf("leader election is off: stop any caliban-operator running in that cluster first, " +
			"or set CALIBAN_LEADER_ELECTION=true and CALIBAN_LEASE_NAMESPACE=<its namespace> to take turns with it")
	}
	logf("watch with `kubectl get caliban -A -w`; the operator's logs follow; Ctrl-C stops it")
	return runOperator(operator, env, sigs)
}

// interruptible runs f with a context that the first signal cancels. It
// returns f's error, or says that it was interrupted.
func interruptible(sigs chan os.Signal, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, watcherDone := make(chan struct{}), make(chan struct{})
	var got os.Signal
	go func() {
		defer close(watcherDone)
		select {
		case got = <-sigs:
			logf("%v: aborting", got)
			cancel()
		case <-done:
		}
	}()
	err := f(ctx)
	close(done)
	<-watcherDone
	if got != nil {
		return fmt.Errorf("start-up interrupted (%v)", got)
	}
	return err
}

// runOperator runs the operator in the foreground and returns its exit code.
func runOperator(binary string, env []string, sigs chan os.Signal) int {
	cmd := exec.Command(binary)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: a Ctrl-C reaches it through us, exactly once,
	// rather than from the terminal and again from us (a second signal
	// commonly means "exit now, skip the shutdown grace").
	cmd.SysProcAttr = operatorSysProcAttr()
	if err := cmd.Start(); err != nil {
		logf("starting the operator: %v", err)
		return 1
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var kill <-chan time.Time
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				s = syscall.SIGTERM
			}
			if kill == nil {
				logf("%v: stopping the operator (it gets %s to stop)", s, stopGrace)
				kill = time.After(stopGrace)
			}
			_ = cmd.Process.Signal(s)
		case <-kill:
			logf("the operator did not stop within %s: killing it", stopGrace)
			_ = cmd.Process.Kill()
		case err := <-waited:
			if cmd.ProcessState == nil {
				logf("waiting for the operator: %v", err)
				return 1
			}
			logf("the operator exited (%v)", cmd.ProcessState)
			return exitCode(cmd.ProcessState)
		}
	}
}

// exitCode is the process's exit code, or 128+signal when a signal ended it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// deleteCluster deletes the LOCAL-mode cluster, once more if the first
// attempt fails (a second Ctrl-C reaches kwokctl too). Signals meanwhile are
// answered with a note, not acted on.
func deleteCluster(cluster *framework.Cluster, sigs chan os.Signal) {
	if cluster == nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				logf("%v: still deleting cluster %s, one moment", s, clusterName)
			case <-done:
				return
			}
		}
	}()
	logf("deleting cluster %s", clusterName)
	err := cluster.Delete()
	if err != nil {
		logf("%v; trying again", err)
		err = cluster.Delete()
	}
	if err != nil {
		logf("%v\nthe next `make run` deletes it, or: bin/kwokctl delete cluster --name %s", err, clusterName)
		return
	}
	logf("cluster %s deleted", clusterName)
}

// lockCluster makes sure only one run-local uses the cluster at a time: a
// leftover cluster is deleted on start, which must not happen to a live one.
// The lock goes with the process, however it ends.
func lockCluster() (unlock func(), err error) {
	dir := framework.WorkDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, clusterName+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another `make run` (pid %s) is using cluster %s", strings.TrimSpace(string(holder)), clusterName)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = f.Close() }, nil
}

// watchParent turns the death of the parent (`go run`, which a SIGTERM
// kills without passing it on) into a SIGTERM for us, so that the operator
// stops and the cluster goes rather than running on unseen.
func watchParent(sigs chan<- os.Signal) {
	ppid := os.Getppid()
	for range time.Tick(time.Second) {
		if os.Getppid() != ppid {
			sigs <- syscall.SIGTERM
			return
		}
	}
}

// readSamples reads the sample manifests, leaving out a kustomization
// (kustomize's input, not an object for the apiserver).
func readSamples(dir string) ([]*unstructured.Unstructured, error) {
	objs, err := framework.ReadManifests(dir)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GroupVersionKind().Group == "kustomize.config.k8s.io"
	}), nil
}

// localMode reports whether run-local starts its own cluster: when
// KUBECONFIG is unset or empty, or LOCAL is 1/true/yes/on.
func localMode(kubeconfig, local string) bool {
	if kubeconfig == "" {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(local)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// operatorBinary is the override when given, else bin/caliban-operator.
func operatorBinary(root, override string) string {
	if override != "" {
		return override
	}
	return filepath.Join(root, "bin", "caliban-operator")
}

// childEnv is the operator's environment: environ without our own
// CALIBAN_OPERATOR_BINARY, with KUBECONFIG replaced when kubeconfig is not
// empty, and operatorDefaults for the variables environ does not set.
func childEnv(environ []string, kubeconfig string) []string {
	env := make([]string, 0, len(environ)+len(operatorDefaults)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == binaryEnv || (kubeconfig != "" && name == "KUBECONFIG") {
			continue
		}
		env = append(env, kv)
	}
	if kubeconfig != "" {
		env = append(env, "KUBECONFIG="+kubeconfig)
	}
	for _, kv := range operatorDefaults {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := lookup(env, name); !ok {
			env = append(env, kv)
		}
	}
	return env
}

// lookup finds name in an environment list.
func lookup(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}
