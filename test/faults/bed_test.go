// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package faults_test breaks what the operator depends on while it works
// (its own process, the apiserver, etcd, its leadership, its watches) and
// checks that nothing is lost, written twice or pinned twice. Each scenario
// runs on a fresh kwokctl cluster of the test bed with the real operator
// binary, configured like its Deployment (its ServiceAccount's RBAC from
// manifests/base, leader election on).
//
// `make test` runs the short sizes; `make test-faults` sets
// CALIBAN_FAULTS_FULL=1 for the full ones (docs/reliability.md).
package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// stopTimeout bounds how long a SIGTERMed operator may take to stop.
const stopTimeout = 30 * time.Second

// scenarioSizes are the knobs a short and a full run differ in.
type scenarioSizes struct {
	burst, afterEdit int
	// restartBurst is the burst a control-plane restart interrupts.
	restartBurst int
	// failoverBurst is the burst during which the leader is killed.
	failoverBurst int
	// deniedTasks are refused their Sandbox for denyFor once they all say
	// so.
	deniedTasks int
	denyFor     time.Duration
	// watchCuts cut the operator's connections; each time watchBatch
	// tasks are created while it is cut off.
	watchCuts, watchBatch int
	killEvery             time.Duration
	killFor               time.Duration
	convergeTimeout       time.Duration
	scenarioTimeout       time.Duration
}

func sizes() scenarioSizes {
	if os.Getenv("CALIBAN_FAULTS_FULL") != "" {
		return scenarioSizes{burst: 1000, afterEdit: 100, restartBurst: 1000, failoverBurst: 500, deniedTasks: 100, denyFor: 30 * time.Second, watchCuts: 10, watchBatch: 50, killEvery: 3 * time.Second, killFor: 60 * time.Second,
			convergeTimeout: 10 * time.Minute, scenarioTimeout: 20 * time.Minute}
	}
	return scenarioSizes{burst: 100, afterEdit: 20, restartBurst: 100, failoverBurst: 100, deniedTasks: 20, denyFor: 10 * time.Second, watchCuts: 3, watchBatch: 10, killEvery: 3 * time.Second, killFor: 15 * time.Second,
		convergeTimeout: 3 * time.Minute, scenarioTimeout: 6 * time.Minute}
}

// build is the operator binary, built once per package run while the
// first scenario's cluster starts; TestMain removes it.
var build *framework.OperatorBuild

func TestMain(m *testing.M) {
	var err error
	if build, err = framework.StartOperatorBuild("caliban-faults-"); err != nil {
		fmt.Fprintf(os.Stderr, "building the operator: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	build.Teardown()
	os.Exit(code)
}

// bed is one scenario's cluster, the operator's identity on it and the
// operator binary.
type bed struct {
	cluster    *framework.Cluster
	bin        string
	kubeconfig string
}

// newBed starts a fresh cluster with opts, installs the operator's RBAC as
// manifests/base does and mints its credentials. Every operator process
// the bed starts is killed when the test ends, its output shown if the
// test failed, and a panic in it fails the test (a panic is often why a
// scenario did not converge).
func newBed(t *testing.T, ctx context.Context, opts framework.Options) *bed {
	t.Helper()
	c, err := framework.StartWithOptions(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster %s logs: %s", c.Name, c.KeepLogs())
		}
		if err := c.Delete(); err != nil {
			t.Error(err)
		}
	})
	b := &bed{cluster: c, bin: build.Binary(t)}
	if err := c.InstallOperatorIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	b.kubeconfig = b.mintKubeconfig(t, ctx)
	return b
}

// scenario starts a scenario on a fresh bed, within its size's time limit.
func scenario(t *testing.T, opts framework.Options) (context.Context, *bed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sizes().scenarioTimeout)
	t.Cleanup(cancel)
	return ctx, newBed(t, ctx, opts)
}

// mustStartOperator is startOperator for the test's own goroutine: it ends
// the test when the process cannot start.
func (b *bed) mustStartOperator(t *testing.T, name, pod, kubeconfig string, env ...string) *framework.Operator {
	t.Helper()
	op := b.startOperator(t, name, pod, kubeconfig, env...)
	if op == nil {
		t.FailNow()
	}
	return op
}

// mintKubeconfig writes a kubeconfig with a token of its own for the
// operator's ServiceAccount: the audit log tells its requests apart from
// those sent with another token (framework.CredentialID).
func (b *bed) mintKubeconfig(t *testing.T, ctx context.Context) string {
	t.Helper()
	kc, err := b.cluster.OperatorKubeconfig(ctx, t.TempDir(), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// startOperator runs the operator process name as its Deployment would run
// it in pod (the lease identity), with a lease short enough (2 s, 1 s of
// grace) that a killed leader's successor leads, and works, before the next
// kill. It authenticates with the bed's kubeconfig unless kubeconfig names
// another; env is added last, so it can override the lease.
func (b *bed) startOperator(t *testing.T, name, pod, kubeconfig string, env ...string) *framework.Operator {
	t.Helper()
	if kubeconfig == "" {
		kubeconfig = b.kubeconfig
	}
	op, err := framework.RunOperator(t, framework.OperatorOptions{
		Name:   name,
		Binary: b.bin,
		Env: append([]string{
			"KUBECONFIG=" + kubeconfig,
			"CALIBAN_LEASE_NAMESPACE=" + framework.OperatorNamespace,
			"POD_NAME=" + pod,
			"CONTROLLER_POD_NAME=" + pod,
			"CALIBAN_LEASE_DURATION_SECONDS=" + strconv.Itoa(int(leaseDuration/time.Second)),
			"CALIBAN_LEASE_GRACE_SECONDS=" + strconv.Itoa(int(leaseGrace/time.Second)),
		}, env...),
		// The crash loop kills on a clock of its own, from the start.
		NoWait:      true,
		ShowLines:   40,
		FailOnPanic: true,
	})
	if err != nil {
		t.Error(err)
		return nil
	}
	return op
}

// The lease every scenario's operators run with.
const (
	leaseDuration = 2 * time.Second
	leaseGrace    = 1 * time.Second
)

// namespace makes a namespace with a provider Secret and a Workspace "ws"
// whose one provider runs model. The operator validates the Workspace when
// it runs; tasks created before that wait for it in Pending.
func (b *bed) namespace(t *testing.T, ctx context.Context, name, model string) string {
	t.Helper()
	c := b.cluster
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "anthropic-key"}, StringData: map[string]string{"api-key": "sk-ant-faults"}}
	if _, err := c.Kube.CoreV1().Secrets(name).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws"},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Fault tests",
			Sources: []calibanv1alpha1.Source{{
				Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
			}},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: model,
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "anthropic-key", Key: "api-key"},
			}},
		},
	}
	if _, err := c.Caliban.CalibanV1alpha1().Workspaces(name).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// setModel edits the Workspace's provider model and returns the new
// generation.
func (b *bed) setModel(t *testing.T, ns, model string) int64 {
	t.Helper()
	return framework.UpdateWorkspace(t, b.cluster.Caliban, ns, "ws", func(spec *calibanv1alpha1.WorkspaceSpec) { spec.Providers[0].Model = model })
}

// waitWorkspaceObserved waits until the Workspace is Ready at generation
// gen or later: the operator has validated the edit.
func (b *bed) waitWorkspaceObserved(t *testing.T, ctx context.Context, ns string, gen int64) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() error {
		ws, err := b.cluster.Caliban.CalibanV1alpha1().Workspaces(ns).Get(ctx, "ws", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ws.Status.Phase != calibanv1alpha1.WorkspaceReady || ws.Status.ObservedGeneration < gen {
			return fmt.Errorf("Workspace %s at generation %d, status %s at %d", ns, ws.Generation, ws.Status.Phase, ws.Status.ObservedGeneration)
		}
		return nil
	})
}

// createTasks creates the named tasks on Workspace "ws", conc at a time.
// Like a client that must get its tasks in, it tries a create that fails
// again until ctx ends: the control plane may be down for a while.
func (b *bed) createTasks(ctx context.Context, ns string, names []string, conc int) error {
	next := make(chan string)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for name := range next {
				task := &calibanv1alpha1.CalibanTask{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: calibanv1alpha1.CalibanTaskSpec{
						WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
						Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout."},
					},
				}
				for {
					_, err := b.cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).Create(ctx, task, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						break
					}
					if !sleepCtx(ctx, 100*time.Millisecond) {
						select {
						case errs <- fmt.Errorf("creating CalibanTask %s: %w", name, err):
						default:
						}
						break
					}
				}
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// waitAllRunning waits until every named task is Running.
func (b *bed) waitAllRunning(t *testing.T, ctx context.Context, ns string, names []string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		list, err := b.cluster.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		phase := map[string]calibanv1alpha1.TaskPhase{}
		for _, task := range list.Items {
			phase[task.Name] = task.Status.Phase
		}
		var waiting []string
		for _, name := range names {
			if phase[name] != calibanv1alpha1.TaskRunning {
				waiting = append(waiting, fmt.Sprintf("%s (%q)", name, phase[name]))
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("%d of %d tasks not Running, e.g. %v", len(waiting), len(names), waiting[:min(5, len(waiting))])
		}
		return nil
	})
}

// checkChildren fails the test unless every named task has exactly one
// Sandbox, one ServiceAccount and one NetworkPolicy, each controlled by it,
// and no child is controlled by anything else.
func (b *bed) checkChildren(t *testing.T, ctx context.Context, ns string, names []string) {
	t.Helper()
	c := b.cluster
	tasks, err := c.Caliban.CalibanV1alpha1().CalibanTasks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := map[string]string{}
	for _, task := range tasks.Items {
		uid[string(task.UID)] = task.Name
	}
	owned := map[string]map[string]int{} // kind → task → count
	count := func(kind string, objs []metav1.Object) {
		owned[kind] = map[string]int{}
		for _, o := range objs {
			ref := metav1.GetControllerOf(o)
			if ref == nil || ref.Kind != "CalibanTask" || uid[string(ref.UID)] == "" {
				t.Errorf("%s %s/%s is controlled by no task of the test (%v)", kind, ns, o.GetName(), ref)
				continue
			}
			owned[kind][uid[string(ref.UID)]]++
		}
	}
	selector := metav1.ListOptions{LabelSelector: builders.LabelManagedBy + "=" + builders.FieldManager}
	sas, err := c.Kube.CoreV1().ServiceAccounts(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	nps, err := c.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := c.Dynamic.Resource(sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []metav1.Object
	for i := range sas.Items {
		objs = append(objs, &sas.Items[i])
	}
	count("ServiceAccount", objs)
	objs = nil
	for i := range nps.Items {
		objs = append(objs, &nps.Items[i])
	}
	count("NetworkPolicy", objs)
	objs = nil
	for i := range sbs.Items {
		objs = append(objs, &sbs.Items[i])
	}
	count("Sandbox", objs)
	kinds := []string{"ServiceAccount", "NetworkPolicy", "Sandbox"}
	for _, name := range names {
		for _, kind := range kinds {
			if n := owned[kind][name]; n != 1 {
				t.Errorf("task %s has %d of kind %s, want 1", name, n, kind)
			}
		}
	}
}

// pinWatch records, from an informer on the namespace's tasks, the first
// pin each task was seen with and every task seen later with another. An
// informer rather than a watch: when a control-plane restart expires the
// watch's resourceVersion, it lists again, and a changed pin shows in the
// list as it would in an event.
type pinWatch struct {
	mu      sync.Mutex
	first   map[string]string
	at      map[string]time.Time
	changes map[string]string // task → its first change
}

func watchPins(t *testing.T, ctx context.Context, c *framework.Cluster, ns string) *pinWatch {
	t.Helper()
	p := &pinWatch{first: map[string]string{}, at: map[string]time.Time{}, changes: map[string]string{}}
	c.WatchTasks(t, ctx, ns, func(task *calibanv1alpha1.CalibanTask) {
		if task.Status.ResolvedWorkspace == nil {
			return
		}
		data, err := json.Marshal(task.Status.ResolvedWorkspace)
		if err != nil {
			return
		}
		pin := string(data)
		p.mu.Lock()
		defer p.mu.Unlock()
		if was, seen := p.first[task.Name]; !seen {
			p.first[task.Name] = pin
			p.at[task.Name] = time.Now()
		} else if _, known := p.changes[task.Name]; !known && was != pin {
			p.changes[task.Name] = fmt.Sprintf("%s: %s → %s", task.Name, was, pin)
		}
	})
	return p
}

func (p *pinWatch) changed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.changes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// pinnedBefore counts the tasks first seen pinned before t.
func (p *pinWatch) pinnedBefore(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.at {
		if at.Before(t) {
			n++
		}
	}
	return n
}

func (p *pinWatch) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.first)
}

func taskNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return names
}

// sleepCtx sleeps for d, or less when ctx ends; it reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
