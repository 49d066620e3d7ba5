// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// realResult is the burst through agent-sandbox's own controller, read
// back from the objects once every task ran.
type realResult struct {
	stages stageSamples
	// nodes is how many nodes the pods could go to.
	nodes int
	// lostReady Sandboxes were seen not Ready after they had been seen
	// Ready, lostReadyTimes times in all.
	lostReady, lostReadyTimes int
}

// runReal is the run with BENCH_AGENT_SANDBOX=real: only the burst, at
// the operator's defaults. The ceiling, paced, steady-state, cold-start
// and bare-client phases would more than double a run whose burst already
// takes minutes, and measure nothing agent-sandbox changes: the operator
// sends the same requests per task either way.
func (b *bench) runReal(ctx context.Context, res *Result) error {
	cfg := b.cfg
	_, env, err := b.operatorIdentity(ctx, res)
	if err != nil {
		return err
	}

	nodes, err := b.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	res.real.nodes = len(nodes.Items)
	// A pod no node has room for would hold the burst until its timeout;
	// the nodes' pod slots (kwok's default, 110 each) run out first.
	slots := int64(0)
	for _, n := range nodes.Items {
		slots += n.Status.Allocatable.Pods().Value()
	}
	if int64(cfg.N) > slots {
		return fmt.Errorf("the cluster's %d nodes have room for %d pods, fewer than the %d tasks of the burst", len(nodes.Items), slots, cfg.N)
	}

	b.logf("1/2 burst of %d tasks through agent-sandbox's controller", cfg.N)
	op, err := b.start(ctx, "burst", env...)
	if err != nil {
		return err
	}
	defer func() { _ = op.Stop() }()
	if err := b.prepareNamespace(ctx, benchNamespace); err != nil {
		return err
	}
	obs, err := b.observe(ctx, benchNamespace)
	if err != nil {
		return err
	}
	if err := b.burst(ctx, op, obs, res); err != nil {
		if !b.cluster.AgentSandboxRunning() {
			err = fmt.Errorf("%w (agent-sandbox's controller is not running: see %s/%s.log)", err, b.cluster.LogsDir, framework.AgentSandboxController)
		}
		return fmt.Errorf("burst: %w", err)
	}
	res.real.lostReady, res.real.lostReadyTimes = obs.sandboxesThatLostReady(res.burst.names)
	b.logf("2/2 reading the stages from the objects")
	if res.real.stages, err = b.readStages(ctx, benchNamespace, res.burst.names); err != nil {
		return err
	}
	if s := res.real.stages; s.Skipped > 0 {
		b.logf("  %d task(s) left out of the stages: %s", s.Skipped, s.Problem)
	}
	if s := res.real.stages; s.NoClaimSplit > 0 {
		b.logf("  %d task(s) not split at the claim's binding: %s", s.NoClaimSplit, s.ClaimProblem)
	}
	if s := res.real.stages; s.NoSandboxSplit > 0 {
		b.logf("  %d task(s) not split at the Sandbox's Ready: %s", s.NoSandboxSplit, s.SandboxProblem)
	}
	return op.Stop()
}

// readStages lists the tasks, Sandboxes, pods and claims of the namespace
// once (four requests, after the burst, when nothing is measured any more)
// and cuts each named task's start at its objects' timestamps.
func (b *bench) readStages(ctx context.Context, namespace string, names []string) (stageSamples, error) {
	tasks, err := b.caliban.CalibanV1alpha1().CalibanTasks(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return stageSamples{}, err
	}
	ul, err := b.dynamic.Resource(sandboxGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return stageSamples{}, err
	}
	pods, err := b.admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return stageSamples{}, err
	}
	claims, err := b.admin.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return stageSamples{}, err
	}
	taskByName := map[string]*calibanv1alpha1.CalibanTask{}
	for i := range tasks.Items {
		taskByName[tasks.Items[i].Name] = &tasks.Items[i]
	}
	sandboxByName := map[string]*sandboxv1beta1.Sandbox{}
	for i := range ul.Items {
		var sb sandboxv1beta1.Sandbox
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ul.Items[i].Object, &sb); err != nil {
			return stageSamples{}, fmt.Errorf("Sandbox %s: %w", ul.Items[i].GetName(), err)
		}
		sandboxByName[sb.Name] = &sb
	}
	// agent-sandbox names the pod after the Sandbox unless an annotation
	// says otherwise; the controller reference holds either way.
	podBySandbox := byOwner(pods.Items, builders.SandboxKind, func(p *corev1.Pod) *metav1.ObjectMeta { return &p.ObjectMeta })
	// The operator's Sandbox has one claim template, the workspace.
	claimBySandbox := byOwner(claims.Items, builders.SandboxKind, func(c *corev1.PersistentVolumeClaim) *metav1.ObjectMeta { return &c.ObjectMeta })

	stamps := make([]startStamps, len(names))
	errs := make([]error, len(names))
	for i, n := range names {
		sbName := builders.SandboxName(n)
		stamps[i], errs[i] = stampsOf(taskByName[n], sandboxByName[sbName], podBySandbox[sbName], claimBySandbox[sbName])
		if errs[i] != nil {
			errs[i] = fmt.Errorf("task %s: %w", n, errs[i])
		}
	}
	return collectStages(stamps, errs), nil
}

// realRows is the main table of a real run.
func (r *Result) realRows() []row {
	n := float64(r.Config.N)
	bu, st := r.burst, r.real.stages
	burst := fmt.Sprintf("burst of %d", r.Config.N)
	objs := "stages (object timestamps, 1 s resolution)"
	wall := bu.after.at.Sub(bu.before.at)
	host := hostDelta(bu.before.host, bu.after.host, wall)
	counted := float64(len(st.Total))
	// The processes read at both ends of the burst do not hold all the
	// machine's busy time: what short-lived processes (builds and tests of
	// whoever else uses the machine) took is the rest.
	var seen time.Duration
	for _, d := range host.byProcess {
		seen += d
	}
	elsewhere := host.busyPercent/100*host.cores*wall.Seconds() - seen.Seconds()
	rows := []row{
		{burst, "creates sent in", bu.createsTook.Seconds(), "s"},
		{burst, "throughput, first create sent → last Running seen", bu.throughput(), "tasks/s"},
		{burst, "create → Running p50 (watch)", percentile(bu.createToRunning(), 50) / 1000, "s"},
		{burst, "create → Running p99 (watch)", percentile(bu.createToRunning(), 99) / 1000, "s"},
		{burst, "machine busy (all cores)", host.busyPercent, "%"},
		{burst, "machine CPU of processes that came and went (other work on the machine)", max(elsewhere, 0), "s"},
		{burst, "machine CPU of other clusters' test-bed processes (other work on the machine)", host.byProcess[otherClustersKey].Seconds(), "s"},
		{burst, "kube-apiserver CPU per task (the machine's speed)", ms(host.byProcess["kube-apiserver"]) / n, "ms"},
		{burst, "agent-sandbox controller CPU per task", ms(host.byProcess["agent-sandbox"]) / n, "ms"},
		{burst, "operator CPU per task", ms(bu.after.cpu-bu.before.cpu) / n, "ms"},
		{burst, "calibantask syncs per task", bu.opDelta("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"}) / n, "syncs"},
		{burst, "operator API requests per task (apiserver)", bu.apf.requests / n, "requests"},
		{burst, "of which object writes, not Events", (bu.apf.writes - bu.apf.eventWrites) / n, "writes"},
		{burst, "operator peak RSS (VmHWM)", bu.peakRSS, "MiB"},
		{burst, "create sent → Sandbox seen p50 (watch; the operator)", percentile(bu.toSandbox, 50), "ms"},
		{burst, "create sent → Sandbox seen p99 (watch; the operator)", percentile(bu.toSandbox, 99), "ms"},
		{burst, "Sandbox Ready seen → task Running seen p50 (watch; the operator)", percentile(bu.readyToRunning, 50), "ms"},
		{burst, "Sandbox Ready seen → task Running seen p99 (watch; the operator)", percentile(bu.readyToRunning, 99), "ms"},
		{objs, "tasks counted", counted, "tasks"},
		{objs, "tasks left out (a stamp missing or out of order)", float64(st.Skipped), "tasks"},
		{objs, "tasks not split at the claim's binding", float64(st.NoClaimSplit), "tasks"},
		{objs, "tasks not split at the Sandbox's Ready (its Ready transition not between pod Ready and task Running)", float64(st.NoSandboxSplit), "tasks"},
		{objs, "Sandboxes seen losing Ready after they had it (watch)", float64(r.real.lostReady), "Sandboxes"},
		{objs, "… times in all", float64(r.real.lostReadyTimes), "times"},
		{objs, "throughput, first task created → last task Running", st.throughput(), "tasks/s"},
	}
	stage := func(what string, ds []time.Duration) {
		rows = append(rows,
			row{objs, what + " p50", seconds(ds, 50), "s"},
			row{objs, what + " p99", seconds(ds, 99), "s"},
			row{objs, what + " mean", mean(ds), "s"},
		)
	}
	stage("task created → Sandbox created (the operator)", st.Operator)
	stage("Sandbox created → pod created (agent-sandbox)", st.AgentSandbox)
	stage("pod created → scheduled (claim binding + scheduler)", st.Scheduling)
	stage("… of which pod created → claim bound (controller-manager's volume binder)", st.ClaimWait)
	stage("… of which claim bound → scheduled (scheduler)", st.AfterClaim)
	stage("scheduled → pod Ready (kwok as the kubelet)", st.PodStart)
	stage("pod Ready → task Running", st.ToRunning)
	stage("… of which pod Ready → Sandbox Ready (agent-sandbox)", st.SandboxReady)
	stage("… of which Sandbox Ready → task Running (the operator)", st.Running)
	stage("task created → task Running", st.Total)
	rows = append(rows, row{objs, "the operator's share of the mean start (its two stages)", st.operatorShare(), "%"})
	return rows
}

// realMethod explains the figures of a real run.
func (r *Result) realMethod() string {
	cfg := r.Config
	return fmt.Sprintf(`- **Cluster**: a fresh kwokctl binary-runtime cluster of the test bed (test/framework, Options.RealAgentSandbox) with agent-sandbox's own CRD and its controller v1.0.3 (bin/agent-sandbox-controller) as a process, kwok's node and pod Stages and %d kwok nodes; kwok plays the kubelet, so a pod turns Ready as soon as kwok processes it once it is bound. %d PersistentVolumes of the operator's default workspace size (no StorageClass) are created before the operator starts, one per task; the controller-manager binds each workspace claim to one, and the scheduler binds a pod only once its claim is bound.
- **Phases**: only the burst. The ceiling, paced, steady-state, cold-start and bare-client phases of the stand-in mode are not run: they would more than double the run, and the operator sends the same requests per task whichever controller makes its Sandboxes Ready.
- **Operator**: the binary of this commit, run as a process with its DEFAULT settings and only what the environment requires, as in the stand-in mode.
- **Burst**: one Ready Workspace with an existing credentials Secret; %d CalibanTasks created by a client at concurrency %d, paced to spread over %s. Throughput (watch) = N / (last task seen Running − first create sent), seen by the harness's watches as in the stand-in mode (millisecond resolution).
- **Stages**: once every task is Running and the operator has been quiet for %s, the tasks, Sandboxes, pods and claims are listed once and each task's start is cut at timestamps its objects carry: the task's creationTimestamp; the Sandbox's; the pod's (found by its controller reference to the Sandbox); the pod's PodScheduled condition turning True (set by the binding); the pod's Ready condition turning True (kwok's pod-ready Stage); the Sandbox's Ready condition turning True (agent-sandbox); the task's Ready condition turning True with phase Running (the operator); and the time the workspace claim (found by its controller reference to the Sandbox) was bound as the scheduler sees it: a claim has no condition for it, so it is the managedFields time of the write that set its spec.volumeName (the controller-manager's volume binder sets it with the bind-completed annotation the scheduler waits for, and writes the status phase Bound after, sometimes after the pod is already scheduled). Kubernetes stores and serves these in whole seconds, truncated, so each stage is off by less than a second either way and a p50 of 0 s means under a second; means are finer, because truncating both ends of an interval does not bias it. Percentiles are nearest-rank. A task with a stamp of the five stages missing or out of order is left out and counted. pod created → scheduled is split at the claim's binding (the wait starts at the pod's creation when the claim was bound earlier) where that lies before the binding of the pod; pod Ready → task Running is split at the Sandbox's Ready only where that condition's lastTransitionTime lies between the pod's Ready and the task's Running: it records the last transition, so a Sandbox whose Ready went away and came back after its task ran cannot be split (counted; the harness's Sandbox watch counts the Sandboxes it saw lose Ready after having it).
- **The operator's share**: (mean task created → Sandbox created + mean Sandbox Ready → task Running, the latter over the tasks that could be split) / mean task created → task Running. The watch rows give the same two stages at millisecond resolution: create sent → Sandbox first seen, and Sandbox first seen Ready → task first seen Running.
- **CPU, syncs and requests per task**: as in the stand-in mode, over the burst (before the first create until every task is Running and the operator quiet), divided by N; the machine's CPU by process from /proc, where agent-sandbox's controller has a row of its own. Processes are read at both ends of the burst, so what processes that started and ended in between used (another user's builds and tests: the machine is shared) is in the busy time only; the row "machine CPU of processes that came and went" is that remainder. Test-bed processes (etcd, kube-*, kwok, agent-sandbox) count under their names only when their command line names this run's cluster; those of other clusters on the machine are a row of their own.
- **Profiles**: none are taken in this mode.
`, r.real.nodes, cfg.N, cfg.N, cfg.CreateConcurrency, cfg.BurstSpread, quietFor)
}
