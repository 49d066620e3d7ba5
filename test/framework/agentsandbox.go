// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSandboxController is the name of agent-sandbox's controller in bin/
// and of its log in the cluster's logs directory.
const AgentSandboxController = "agent-sandbox-controller"

// realNodes is how many kwok nodes a cluster with the real agent-sandbox
// gets: enough that pods spread, few enough that kwok's heartbeats cost
// nothing.
const realNodes = 3

// startAgentSandbox makes a cluster run the real agent-sandbox: kwok's node
// and pod Stages (test/stages/kwok, copied from the kwok module), kwok
// nodes, the CRDs of its extensions API (test/crds/extensions: templates,
// warm pools, claims), and agent-sandbox's controller
// (bin/agent-sandbox-controller, built from the pinned module) with its
// extensions on, as a process of the test, logging into LogsDir. The
// Sandbox CRD is already installed.
func (c *Cluster) startAgentSandbox(ctx context.Context) error {
	bin := filepath.Join(c.bin, AgentSandboxController)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("test bed binary %s is missing: run `make tools` (it builds it from hack/tools/agent-sandbox)", bin)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(c.Root, "test", "crds", "extensions")); err != nil {
		return err
	}
	stages, err := ReadManifests(filepath.Join(c.Root, "test", "stages", "kwok"))
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, "", stages...); err != nil {
		return fmt.Errorf("applying kwok's node and pod Stages: %w", err)
	}
	if out, err := c.kwokctl(ctx, "scale", "node", "--name", c.Name, "--replicas", strconv.Itoa(realNodes)); err != nil {
		return fmt.Errorf("kwokctl scale node: %w\n%s", err, out)
	}
	if err := c.waitNodesReady(ctx, realNodes); err != nil {
		return err
	}

	if err := os.MkdirAll(c.LogsDir, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(c.LogsDir, AgentSandboxController+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	// Only flags v1.0 knows: it refuses to start on the removed webhook ones.
	args := append([]string{
		"--kubeconfig", c.Kubeconfig,
		"--extensions",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	}, c.opts.AgentSandboxArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It dies with the test binary; Delete stops it first otherwise.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.agentSandbox = cmd
	c.agentSandboxExited = exited
	return nil
}

// stopAgentSandbox ends the controller process, if the cluster runs one.
func (c *Cluster) stopAgentSandbox() {
	if c.agentSandbox == nil {
		return
	}
	_ = c.agentSandbox.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.agentSandboxExited:
	case <-time.After(10 * time.Second):
		_ = c.agentSandbox.Process.Kill()
		<-c.agentSandboxExited
	}
	c.agentSandbox = nil
}

// AgentSandboxRunning reports whether the cluster's agent-sandbox
// controller process is alive: a test that saw something go wrong checks
// this first (the log is LogsDir/agent-sandbox-controller.log).
func (c *Cluster) AgentSandboxRunning() bool {
	if c.agentSandbox == nil {
		return false
	}
	select {
	case <-c.agentSandboxExited:
		return false
	default:
		return true
	}
}

// waitNodesReady waits for kwok to play the node Stages. Two minutes, not
// one: on a loaded two-core machine (a CI run beside another test cluster)
// kwok has once taken longer than a minute to load its Stages.
func (c *Cluster) waitNodesReady(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		seen, ready := 0, 0
		if err == nil {
			seen = len(nodes.Items)
			for _, node := range nodes.Items {
				for _, cond := range node.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d kwok nodes Ready after two minutes (%d nodes exist; last error: %v); kwok's log is kwok-controller.log in the component logs",
				ready, n, seen, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ProvideVolumes creates n PersistentVolumes of size each (hostPath, which
// no kwok node ever mounts; no StorageClass, as a claim without one asks
// for when the cluster has no default class) for the workspace claims
// agent-sandbox makes, which the controller-manager binds. Names start with
// prefix, so tests sharing a cluster do not collide.
func (c *Cluster) ProvideVolumes(ctx context.Context, prefix string, n int, size string) error {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return err
	}
	for i := range n {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + prefix + "-" + strconv.Itoa(i)},
				},
			},
		}
		_, err := c.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
		}
	}
	return nil
}
