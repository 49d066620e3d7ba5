// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package framework runs integration tests against a real Kubernetes control
// plane: a kwokctl binary-runtime cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, built by `make tools` into
// bin/) with the caliban CRDs, agent-sandbox's Sandbox CRD, and either kwok
// Stages that play agent-sandbox's controller or (Options.RealAgentSandbox)
// that controller itself with pods on kwok nodes.
//
// A package shares one cluster through Main; each test works in namespaces
// of its own. The cluster is deleted when the tests end, fail, are
// interrupted or run into go test's -timeout.
package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
)

// namePrefix starts every cluster this package creates, so that clusters
// left behind by a killed test binary can be recognised and removed.
const namePrefix = "caliban-it-"

// Cluster is a running test cluster and clients for it.
type Cluster struct {
	// Name is the kwokctl cluster name.
	Name string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// LogsDir holds each component's log.
	LogsDir string
	// Root is the repository root.
	Root string

	Config  *rest.Config
	Kube    kubernetes.Interface
	Caliban calibanclient.Interface
	Dynamic dynamic.Interface
	APIExt  apiextensionsclient.Interface

	bin     string
	tempDir string
	// opts are the Options the cluster was started with.
	opts Options
	// stopped are the components StopComponent stopped, by name.
	stoppedMu sync.Mutex
	stopped   map[string]stoppedComponent
	// portsLock is lockPorts' lock, held while a component is stopped.
	portsLock *os.File
	// agentSandbox is agent-sandbox's controller, with Options.RealAgentSandbox.
	agentSandbox       *exec.Cmd
	agentSandboxExited chan struct{}
}

// RepoRoot finds the repository root from the working directory (go test
// runs in the package's directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/caliban-ai/caliban-operator\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the caliban-operator repository")
		}
		dir = parent
	}
}

// binaries are the test bed's executables, as `make tools` names them.
var binaries = []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Start creates a cluster and installs the CRDs and Stages. On failure it
// deletes whatever it created and says where the component logs are.
func Start(ctx context.Context) (*Cluster, error) {
	return StartWithOptions(ctx, Options{})
}

// StartWithOptions is Start with the installation changed by opts.
func StartWithOptions(ctx context.Context, opts Options) (*Cluster, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Root: root, bin: filepath.Join(root, "bin"), opts: opts}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			return nil, fmt.Errorf("test bed binary %s is missing: run `make tools` (it builds bin/ from hack/tools)", filepath.Join(c.bin, b))
		}
	}
	reapOrphans(c.bin)

	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	c.Name = fmt.Sprintf("%s%d-%s", namePrefix, os.Getpid(), hex.EncodeToString(suffix))
	c.LogsDir = filepath.Join(workDir(), "clusters", c.Name, "logs")
	if c.tempDir, err = os.MkdirTemp("", c.Name); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(c.tempDir, "kubeconfig")

	if err := c.create(ctx); err != nil {
		err = fmt.Errorf("%w\ncomponent logs: %s", err, c.KeepLogs())
		if derr := c.Delete(); derr != nil {
			err = fmt.Errorf("%w\ndeleting the cluster: %v", err, derr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) create(ctx context.Context) error {
	args := []string{
		"create", "cluster", "--name", c.Name, "--runtime", "binary",
		"--kubeconfig", c.Kubeconfig,
		"--kube-apiserver-binary", filepath.Join(c.bin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(c.bin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(c.bin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(c.bin, "kwok"),
		"--etcd-binary", filepath.Join(c.bin, "etcd"),
		// kwok reads Stages as objects, so they can be applied once the
		// Sandbox CRD exists: kwok exits when a Stage given in its config
		// names a resource the apiserver does not serve yet.
		"--enable-crds", "Stage",
		"--wait", "2m",
	}
	if c.opts.AuditOperator {
		policy := filepath.Join(c.tempDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(operatorAuditPolicy), 0o600); err != nil {
			return err
		}
		args = append(args, "--kube-audit-policy", policy)
	}
	if err := c.createLocked(ctx, args); err != nil {
		return err
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", c.Kubeconfig, err)
	}
	// Tests create and poll a lot; client-go's default 5 QPS would make them
	// wait on the client rather than on the server.
	cfg.QPS, cfg.Burst = 100, 200
	c.Config = cfg
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.Caliban, err = calibanclient.NewForConfig(cfg); err != nil {
		return err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if c.APIExt, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	if err := c.waitForDefaultServiceAccount(ctx); err != nil {
		return err
	}
	var crds []string
	if !c.opts.WithoutCalibanCRDs {
		crds = append(crds, filepath.Join(c.Root, "manifests", "crds"))
	}
	if c.opts.WithoutSandbox {
		// InstallSandbox adds the Sandbox CRD and the Stages later.
		return c.InstallCRDs(ctx, crds...)
	}
	if err := c.InstallCRDs(ctx, append(crds, filepath.Join(c.Root, "test", "crds"))...); err != nil {
		return err
	}
	if c.opts.RealAgentSandbox {
		return c.startAgentSandbox(ctx)
	}
	// kwok starts a Stage's controller only once the apiserver publishes
	// the resource's OpenAPI v3, which lags behind the CRD's Established
	// condition; SyncStages waits for it.
	return c.SyncStages(ctx)
}

// createLocked runs `kwokctl create cluster` under lockPorts: two clusters
// created at once (test packages run two at a time) chose the same ports,
// and one cluster's clients reached the other's apiserver.
func (c *Cluster) createLocked(ctx context.Context, args []string) error {
	lock, err := lockPorts()
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }() // closing releases the lock
	if out, err := c.kwokctl(ctx, args...); err != nil {
		return fmt.Errorf("kwokctl create cluster: %w\n%s", err, out)
	}
	return nil
}

// lockPorts takes the machine's lock on kwokctl's ports, waiting for it;
// closing the file releases it. kwokctl's binary runtime records no port as
// used by a cluster: it only tries to bind each candidate. So the lock is
// held while a cluster is created, and also while one of a cluster's
// components is stopped (StopComponent until StartComponent), whose port
// would otherwise look free to a cluster created meanwhile. A process must
// not create a cluster while it holds the lock for a stopped component.
func lockPorts() (*os.File, error) {
	if err := os.MkdirAll(workDir(), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(workDir(), "caliban-it-create.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	return lock, nil
}

// waitForDefaultServiceAccount waits until the controller-manager is doing
// its job, which tests that create pods or rely on the garbage collector need.
func (c *Cluster) waitForDefaultServiceAccount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		_, err := c.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "default", getOpts)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager never created the default ServiceAccount: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Delete deletes the cluster and its processes. It is safe to call twice.
func (c *Cluster) Delete() error {
	if c == nil || c.Name == "" {
		return nil
	}
	c.stopAgentSandbox()
	c.stoppedMu.Lock()
	if c.portsLock != nil {
		_ = c.portsLock.Close()
		c.portsLock = nil
	}
	c.stoppedMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name)
	if c.tempDir != "" {
		_ = os.RemoveAll(c.tempDir)
	}
	if err != nil {
		return fmt.Errorf("kwokctl delete cluster --name %s: %w\n%s", c.Name, err, out)
	}
	return nil
}

// KeepLogs copies the component logs out of the cluster's directory, which
// Delete removes, and returns where they are now: after a failure they are
// what says why.
func (c *Cluster) KeepLogs() string {
	dst := filepath.Join(os.TempDir(), "caliban-it-logs", c.Name)
	if err := os.CopyFS(dst, os.DirFS(c.LogsDir)); err != nil {
		return fmt.Sprintf("%s (deleted with the cluster; copying them to %s failed: %v)", c.LogsDir, dst, err)
	}
	return dst
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kwokctl"), args...)
	// kwokctl must not add the cluster to the user's ~/.kube/config.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd.CombinedOutput()
}

// workDir is where kwokctl keeps cluster state (KWOK_WORKDIR, else ~/.kwok).
func workDir() string {
	if d := os.Getenv("KWOK_WORKDIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kwok")
}

// reapOrphans deletes clusters of this package whose test process is gone:
// a test binary killed with SIGKILL cannot clean up after itself.
func reapOrphans(bin string) {
	entries, err := os.ReadDir(filepath.Join(workDir(), "clusters"))
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, namePrefix) {
			continue
		}
		pidText, _, _ := strings.Cut(strings.TrimPrefix(name, namePrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || processAlive(pid) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = exec.CommandContext(ctx, filepath.Join(bin, "kwokctl"), "delete", "cluster", "--name", name).Run()
		cancel()
	}
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
