// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	extac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/extensions/v1beta1"
)

// warmResult is the warm variant (BENCH_AGENT_SANDBOX=warm): agent-sandbox
// alone serving bare claims from a full pool, then the operator starting
// tasks of a Workspace whose pool is full, on one cluster.
type warmResult struct {
	nodes int
	// bareFill and opFill are how long each pool took to fill.
	bareFill, opFill time.Duration
	// claimToReady is each bare claim's create sent → Ready seen.
	claimToReady []time.Duration
	// bareWarm counts bare claims served a pool Sandbox.
	bareWarm int
	// warmPath counts tasks that took the warm path, warmSandbox those
	// that ran on a Sandbox taken ready from the pool.
	warmPath, warmSandbox int
	// stageMeans is the operator's own timing of warm starts
	// (caliban_task_start_duration_seconds{launch="warm"}): mean ms by
	// stage, and how many starts.
	stageMeans map[string]float64
	warmStarts float64
	// coldToRunning is each cold task's create sent → Running seen.
	coldToRunning []time.Duration
	// toClaim, claimToReady and claimReadyToRunning split each warm task's
	// create sent → Running seen at its claim, on the bench's watches: the
	// middle one is agent-sandbox's part, measured like the bare claims.
	toClaim, opClaimToReady, claimReadyToRunning []time.Duration
	// bareSeenToReady is each bare claim's first seen → Ready seen.
	bareSeenToReady []time.Duration
	// bareWrites and opWrites are every client's writes on the apiserver
	// while the bare claims, and the operator's burst, went to Ready and
	// Running, by verb and resource.
	bareWrites, opWrites map[string]float64
	// bareHost is the machine's CPU from the first bare claim sent to the
	// last seen Ready, over bareWall: the load agent-sandbox alone puts on
	// the machine, beside the operator burst's.
	bareHost hostShare
	bareWall time.Duration
	// shapes are the operator's warm burst paced, then all at once, each
	// on a full pool (warmshapes.go).
	shapes []shapeResult
}

// bareNamespace holds agent-sandbox's bare claims.
const bareNamespace = "bench-bare"

// benchSource is the warm Workspace's source: a commit, since a pool
// clones before its tasks exist (docs/warm-start.md#sources).
var benchSource = calibanv1alpha1.Source{Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git",
	Ref: "4b825dc642cb6eb9a060e54bf8d69288fbee4904", Path: "/work/caliban"}

// runWarm measures, on one cluster, agent-sandbox's claim from a full pool
// on its own, then the operator's warm start at its defaults.
func (b *bench) runWarm(ctx context.Context, res *Result) error {
	cfg := b.cfg
	_, env, err := b.operatorIdentity(ctx, res)
	if err != nil {
		return err
	}
	nodes, err := b.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	res.warm.nodes = len(nodes.Items)

	b.logf("1/5 agent-sandbox alone: a pool of %d, then %d bare SandboxClaims", cfg.N, cfg.N)
	if err := b.bareClaims(ctx, res); err != nil {
		return fmt.Errorf("bare claims: %w", err)
	}

	b.logf("2/5 the operator: a Workspace with a pool of %d, then a burst of %d tasks", cfg.N, cfg.N)
	op, err := b.start(ctx, "warm", env...)
	if err != nil {
		return err
	}
	defer func() { _ = op.Stop() }()
	if err := b.prepareNamespace(ctx, benchNamespace, func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Sources = []calibanv1alpha1.Source{benchSource}
		spec.WarmPool = &calibanv1alpha1.WarmPool{Replicas: int32(cfg.N)}
	}); err != nil {
		return err
	}
	filled := time.Now()
	if err := b.waitFullPool(ctx); err != nil {
		return err
	}
	res.warm.opFill = time.Since(filled)
	b.logf("  the Workspace's pool is full after %s", res.warm.opFill.Round(time.Millisecond))
	obs, err := b.observe(ctx, benchNamespace)
	if err != nil {
		return err
	}
	claims, stopClaims, err := b.watchClaimsReady(ctx, benchNamespace)
	if err != nil {
		return err
	}
	defer stopClaims()
	writesBefore, err := b.apiserverRequests(ctx)
	if err != nil {
		return err
	}
	b.afterRunning = func() {
		if after, err := b.apiserverRequests(ctx); err == nil {
			res.warm.opWrites = delta(writesBefore, after)
		} else {
			b.logf("  no count of the apiserver's writes: %v", err)
		}
	}
	shape, err := b.watchShape(ctx, benchNamespace)
	if err != nil {
		return err
	}
	if err := b.burst(ctx, op, obs, res); err != nil {
		shape.stop()
		return fmt.Errorf("burst: %w", err)
	}
	paced, err := shape.finish(ctx, b, benchNamespace, pacedLabel(cfg.N, cfg.BurstSpread), res.burst.names, res.burst.sent, res.burst.running)
	if err != nil {
		return err
	}
	res.warm.shapes = append(res.warm.shapes, paced)
	for i, name := range res.burst.names {
		claim := builders.ClaimName(name)
		seen, ready := claims.seenAt(claim), claims.at(claim)
		if seen.IsZero() || ready.IsZero() {
			continue
		}
		res.warm.toClaim = append(res.warm.toClaim, seen.Sub(res.burst.sent[i]))
		res.warm.opClaimToReady = append(res.warm.opClaimToReady, ready.Sub(seen))
		res.warm.claimReadyToRunning = append(res.warm.claimReadyToRunning, res.burst.running[i].Sub(ready))
	}

	b.logf("3/5 reading the launches and the operator's stages")
	if err := b.readLaunches(ctx, res); err != nil {
		return err
	}
	m, err := op.metrics(ctx)
	if err != nil {
		return err
	}
	res.warm.stageMeans = map[string]float64{}
	for _, stage := range builders.StartStages {
		l := map[string]string{"stage": stage, "launch": builders.LaunchTypeWarm}
		count := m.sum("caliban_task_start_duration_seconds_count", l)
		if count > 0 {
			res.warm.stageMeans[stage] = m.sum("caliban_task_start_duration_seconds_sum", l) / count * 1000
		}
		if stage == builders.StageCreatedToRunning {
			res.warm.warmStarts = count
		}
	}

	// The second shape on the same pool: the paced tasks go, the pool is
	// full again (agent-sandbox refilled it after the paced burst), then N
	// tasks at once.
	b.logf("4/5 all at once: the paced tasks deleted, the pool full again, then %d tasks with no pacing, %d creates in flight", cfg.N, cfg.CreateConcurrency)
	if err := b.resetWarmNamespace(ctx, res.burst.names); err != nil {
		return err
	}
	once, err := b.allAtOnce(ctx, obs)
	if err != nil {
		return fmt.Errorf("all at once: %w", err)
	}
	res.warm.shapes = append(res.warm.shapes, once)

	// The same burst on a Workspace without a pool, by the same operator
	// on the same cluster: the cold path it replaces.
	b.logf("5/5 the cold path: a burst of %d tasks of a Workspace without a pool", cfg.N)
	if err := b.prepareNamespace(ctx, coldNamespace, func(spec *calibanv1alpha1.WorkspaceSpec) {
		spec.Sources = []calibanv1alpha1.Source{benchSource}
	}); err != nil {
		return err
	}
	coldObs, err := b.observe(ctx, coldNamespace)
	if err != nil {
		return err
	}
	names := taskNames("k", cfg.N)
	sent, err := b.createTasks(ctx, coldNamespace, names, float64(cfg.N)/cfg.BurstSpread.Seconds(), cfg.CreateConcurrency)
	if err != nil {
		return err
	}
	if err := coldObs.waitRunning(ctx, b, names, cfg.RunningTimeout); err != nil {
		return fmt.Errorf("cold burst: %w", err)
	}
	for i, at := range coldObs.runningAt(names) {
		res.warm.coldToRunning = append(res.warm.coldToRunning, at.Sub(sent[i]))
	}
	return op.Stop()
}

// coldNamespace holds the cold burst of a warm run.
const coldNamespace = "bench-cold"

// warmWorkspace is the Workspace the bare pool is rendered from: what the
// operator would render for the benchmark's Workspace, so both pools make
// the same pods.
func warmWorkspace(namespace string, replicas int) *calibanv1alpha1.Workspace {
	return &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: workspaceName, Namespace: namespace},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Benchmark workspace",
			Sources:     []calibanv1alpha1.Source{benchSource},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey},
			}},
			WarmPool: &calibanv1alpha1.WarmPool{Replicas: int32(replicas)},
		},
	}
}

// bareClaims fills a pool of the operator's rendering without the
// operator, claims every Sandbox of it at the burst's pace, and deletes it
// all again, so that the operator's phase has the nodes to itself.
func (b *bench) bareClaims(ctx context.Context, res *Result) error {
	cfg := b.cfg
	ns := bareNamespace
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ws := warmWorkspace(ns, cfg.N)
	// The pods run as the pool's ServiceAccount, which must exist.
	if _, err := b.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: builders.WarmPoolName(ws.Name)}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pin, ok := builders.PoolPin(ws)
	if !ok {
		return fmt.Errorf("the benchmark Workspace names no provider")
	}
	r, err := builders.RenderWarm(builders.PoolTask(ws), pin, config.DefaultAgentSettings())
	if err != nil {
		return err
	}
	// No owner: nothing owns the bare pool, and the garbage collector would
	// take objects whose owner does not exist.
	template := builders.BuildWarmTemplate(ws, r)
	template.OwnerReferences = nil
	pool := builders.BuildWarmPool(ws, *template.Name)
	pool.OwnerReferences = nil
	ext := b.caliban.ExtensionsV1beta1()
	apply := metav1.ApplyOptions{FieldManager: "bench", Force: true}
	if _, err := ext.SandboxTemplates(ns).Apply(ctx, template, apply); err != nil {
		return err
	}
	filled := time.Now()
	if _, err := ext.SandboxWarmPools(ns).Apply(ctx, pool, apply); err != nil {
		return err
	}
	if err := b.poll(ctx, cfg.RunningTimeout, func() (bool, string, error) {
		p, err := ext.SandboxWarmPools(ns).Get(ctx, *pool.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.ReadyReplicas >= int32(cfg.N), fmt.Sprintf("%d/%d ready", p.Status.ReadyReplicas, cfg.N), nil
	}); err != nil {
		return fmt.Errorf("filling the bare pool: %w", err)
	}
	res.warm.bareFill = time.Since(filled)
	b.logf("  the bare pool is full after %s", res.warm.bareFill.Round(time.Millisecond))

	ready, stop, err := b.watchClaimsReady(ctx, ns)
	if err != nil {
		return err
	}
	defer stop()
	names := taskNames("c", cfg.N)
	hostBefore, err := b.hostCPU()
	if err != nil {
		return err
	}
	writesBefore, err := b.apiserverRequests(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	profiled := b.profileAPIServer(ctx, res, "bare-claims")
	sent, err := sendPaced(ctx, len(names), float64(cfg.N)/cfg.BurstSpread.Seconds(), cfg.CreateConcurrency, func(ctx context.Context, i int) error {
		claim := extac.SandboxClaim(names[i], ns).WithSpec(extac.SandboxClaimSpec().
			WithWarmPoolRef(extac.SandboxWarmPoolRef().WithName(*pool.Name)))
		if _, err := ext.SandboxClaims(ns).Apply(ctx, claim, apply); err != nil {
			return fmt.Errorf("creating SandboxClaim %s: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.poll(ctx, cfg.RunningTimeout, func() (bool, string, error) {
		n := ready.count(names)
		return n == len(names), fmt.Sprintf("%d/%d claims Ready", n, len(names)), nil
	}); err != nil {
		return err
	}
	hostAfter, err := b.hostCPU()
	if err != nil {
		return err
	}
	res.warm.bareWall = time.Since(began)
	writesAfter, err := b.apiserverRequests(ctx)
	if err != nil {
		return err
	}
	res.warm.bareWrites = delta(writesBefore, writesAfter)
	res.warm.bareHost = hostDelta(hostBefore, hostAfter, res.warm.bareWall)
	profiled()
	for i, n := range names {
		res.warm.claimToReady = append(res.warm.claimToReady, ready.at(n).Sub(sent[i]))
		if seen := ready.seenAt(n); !seen.IsZero() {
			res.warm.bareSeenToReady = append(res.warm.bareSeenToReady, ready.at(n).Sub(seen))
		}
	}
	b.logf("  %d claims Ready; p50 %.0f ms, p99 %.0f ms from create", len(names), percentile(res.warm.claimToReady, 50), percentile(res.warm.claimToReady, 99))

	sandboxes, err := b.dynamic.Resource(sandboxGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, sb := range sandboxes.Items {
		if owner := metav1.GetControllerOf(&sb); owner != nil && owner.Kind == "SandboxClaim" && sb.GetLabels()[builders.LabelLaunchType] == builders.LaunchTypeWarm {
			res.warm.bareWarm++
		}
	}

	// Everything goes, and its pods with it, before the operator's phase.
	background := metav1.DeletePropagationBackground
	if err := ext.SandboxWarmPools(ns).Delete(ctx, *pool.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		return err
	}
	for _, n := range names {
		if err := ext.SandboxClaims(ns).Delete(ctx, n, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			return err
		}
	}
	return b.poll(ctx, cfg.RunningTimeout, func() (bool, string, error) {
		pods, err := b.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d bare pods left", len(pods.Items)), nil
	})
}

// claimsReady records when each claim was first seen, and first seen
// Ready.
type claimsReady struct {
	mu          sync.Mutex
	seen, ready map[string]time.Time
}

func (c *claimsReady) seenAt(name string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[name]
}

func (c *claimsReady) count(names []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := c.ready[name]; ok {
			n++
		}
	}
	return n
}

func (c *claimsReady) at(name string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready[name]
}

// watchClaimsReady watches the claims of ns from now on.
func (b *bench) watchClaimsReady(ctx context.Context, ns string) (*claimsReady, func(), error) {
	claims := b.caliban.ExtensionsV1beta1().SandboxClaims(ns)
	list, err := claims.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return claims.Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	c := &claimsReady{seen: map[string]time.Time{}, ready: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			claim, ok := ev.Object.(*extv1beta1.SandboxClaim)
			if !ok {
				continue
			}
			c.mu.Lock()
			if _, seen := c.seen[claim.Name]; !seen {
				c.seen[claim.Name] = now
			}
			if _, seen := c.ready[claim.Name]; !seen && meta.IsStatusConditionTrue(claim.Status.Conditions, builders.ConditionReady) {
				c.ready[claim.Name] = now
			}
			c.mu.Unlock()
		}
	}()
	return c, w.Stop, nil
}

// waitFullPool waits until the benchmark Workspace says its pool is full.
func (b *bench) waitFullPool(ctx context.Context) error {
	return b.poll(ctx, b.cfg.RunningTimeout, func() (bool, string, error) {
		ws, err := b.caliban.CalibanV1alpha1().Workspaces(benchNamespace).Get(ctx, workspaceName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond := meta.FindStatusCondition(ws.Status.Conditions, builders.ConditionWarmPoolReady)
		if cond == nil {
			return false, "no WarmPoolReady condition yet", nil
		}
		return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == ws.Generation, cond.Reason + ": " + cond.Message, nil
	})
}

// poll runs check every 200 ms until it says done, and reports progress
// every 10 s; it fails after timeout with check's last word.
func (b *bench) poll(ctx context.Context, timeout time.Duration, check func() (bool, string, error)) error {
	start := time.Now()
	next := start.Add(10 * time.Second)
	for {
		done, note, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("not done after %s: %s", timeout, note)
		}
		if time.Now().After(next) {
			b.logf("  %s after %s", note, time.Since(start).Round(time.Second))
			next = next.Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readLaunches counts, among the burst's tasks, the warm path and the
// Sandboxes taken from the pool.
func (b *bench) readLaunches(ctx context.Context, res *Result) error {
	tasks, err := b.caliban.CalibanV1alpha1().CalibanTasks(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sandboxes, err := b.dynamic.Resource(sandboxGVR).Namespace(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	launchOf := map[string]string{}
	for _, sb := range sandboxes.Items {
		launchOf[sb.GetName()] = sb.GetLabels()[builders.LabelLaunchType]
	}
	for _, t := range tasks.Items {
		if builders.IsWarm(&t) {
			res.warm.warmPath++
		}
		if t.Status.SandboxRef != nil && launchOf[t.Status.SandboxRef.Name] == builders.LaunchTypeWarm {
			res.warm.warmSandbox++
		}
	}
	return nil
}

// warmRows is the main table of a warm run.
func (r *Result) warmRows() []row {
	n := float64(r.Config.N)
	bu, w := r.burst, r.warm
	bare := fmt.Sprintf("agent-sandbox alone, %d claims", r.Config.N)
	op := fmt.Sprintf("operator, burst of %d tasks", r.Config.N)
	opP50 := percentile(bu.createToRunning(), 50)
	bareP50 := percentile(w.claimToReady, 50)
	ratio := 0.0
	if bareP50 > 0 {
		ratio = opP50 / bareP50
	}
	rows := []row{
		{bare, "pool of N filled in", w.bareFill.Seconds(), "s"},
		{bare, "claim created → Ready p50 (watch)", bareP50 / 1000, "s"},
		{bare, "claim created → Ready p99 (watch)", percentile(w.claimToReady, 99) / 1000, "s"},
		{bare, "claim seen → claim Ready p50 (watch)", percentile(w.bareSeenToReady, 50) / 1000, "s"},
		{bare, "claims served a pool Sandbox", 100 * float64(w.bareWarm) / n, "%"},
		{op, "pool of N filled in (Workspace created → WarmPoolReady)", w.opFill.Seconds(), "s"},
		{op, "creates sent in", bu.createsTook.Seconds(), "s"},
		{op, "create → Running p50 (watch)", opP50 / 1000, "s"},
		{op, "create → Running p99 (watch)", percentile(bu.createToRunning(), 99) / 1000, "s"},
		{op, "create → Running p50 / agent-sandbox's claim → Ready p50", ratio, "×"},
		{op, "create sent → its claim seen p50 (watch)", percentile(w.toClaim, 50) / 1000, "s"},
		{op, "claim seen → claim Ready p50 (watch; agent-sandbox's part)", percentile(w.opClaimToReady, 50) / 1000, "s"},
		{op, "claim Ready → task Running p50 (watch)", percentile(w.claimReadyToRunning, 50) / 1000, "s"},
		{op, "tasks on the warm path (status.launch Warm)", 100 * float64(w.warmPath) / n, "%"},
		{op, "tasks on a Sandbox taken ready from the pool (launch-type warm)", 100 * float64(w.warmSandbox) / n, "%"},
		{op, "throughput, first create sent → last Running seen", bu.throughput(), "tasks/s"},
		{op, "operator CPU per task", ms(bu.after.cpu-bu.before.cpu) / n, "ms"},
		{op, "calibantask syncs per task", bu.opDelta("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"}) / n, "syncs"},
		{op, "operator API requests per task (apiserver)", bu.apf.requests / n, "requests"},
		{op, "of which object writes, not Events", (bu.apf.writes - bu.apf.eventWrites) / n, "writes"},
		{op, "operator peak RSS (VmHWM)", bu.peakRSS, "MiB"},
	}
	cold := fmt.Sprintf("operator, cold burst of %d tasks (no pool)", r.Config.N)
	coldP50 := percentile(w.coldToRunning, 50)
	speedup := 0.0
	if opP50 > 0 {
		speedup = coldP50 / opP50
	}
	rows = append(rows,
		row{cold, "create → Running p50 (watch)", coldP50 / 1000, "s"},
		row{cold, "create → Running p99 (watch)", percentile(w.coldToRunning, 99) / 1000, "s"},
		row{cold, "cold p50 / warm p50", speedup, "×"},
	)
	stages := "the operator's timing of warm starts (caliban_task_start_duration_seconds{launch=\"warm\"}, mean)"
	for _, stage := range builders.StartStages {
		rows = append(rows, row{stages, strings.ReplaceAll(stage, "_", " "), w.stageMeans[stage], "ms"})
	}
	rows = append(rows, row{stages, "warm starts timed", w.warmStarts, "starts"})
	for _, s := range w.shapes {
		rows = append(rows, s.rows()...)
	}
	return rows
}

// warmMethod explains the figures of a warm run.
func (r *Result) warmMethod() string {
	cfg := r.Config
	return fmt.Sprintf(`- **Cluster**: as for BENCH_AGENT_SANDBOX=real (a kwokctl cluster of the test bed with agent-sandbox's controller v1.0.3 as a process, run with --extensions and its extension CRDs; %d kwok nodes), with %d PersistentVolumes: a pool takes one per Sandbox it makes, refills included.
- **agent-sandbox alone**: in namespace %s, a SandboxTemplate and a SandboxWarmPool of %d replicas applied by the harness, with the pod the operator renders for the benchmark Workspace (builders.RenderWarm, its source pinned to a commit), and the pool's ServiceAccount. Once the pool reports %d ready, %d SandboxClaims are created at concurrency %d, paced over %s; each claim's create sent → first seen Ready (its Ready condition True) on a watch. Then the pool and the claims are deleted, and their pods are gone, before the operator starts.
- **The operator**: the binary of this commit at its defaults, under its own RBAC; a Workspace like the one above with spec.warmPool.replicas %d. Once its WarmPoolReady condition is True, the burst as in the other modes (%d tasks, concurrency %d, over %s), create sent → first seen Running on a watch. "Warm path" counts tasks whose status.launch is Warm; "taken ready from the pool" those whose Sandbox is labelled agents.x-k8s.io/launch-type=warm (a claim that found no ready Sandbox makes one from the template, labelled cold).
- **Two shapes of the warm burst**, on the same cluster, operator and Workspace: *paced* is the burst above (%d creates over %s); then the paced tasks are deleted (their claims and the Sandboxes the claims control go with them), agent-sandbox has refilled the pool, and once no claim is left, the SandboxWarmPool reports %d ready and the Workspace's WarmPoolReady is True, *all at once* creates %d tasks with no pacing, %d in flight, as a client restarting with a backlog would. The same namespace keeps the pool and its refill the only warm Sandboxes; a fresh namespace would fill a second pool of N beside the first's refill. Each shape's create sent → first seen Running, on the observer's watch.
- **Duplicates**, per shape: a Sandbox counts for a task when its controller owner reference is the task's SandboxClaim (builders.ClaimName, matched by the claim's UID). "At the end" lists the claims and Sandboxes once every task of the shape is Running (after the operator settled, for the paced shape); "most at once" is the largest number of claims controlling two or more Sandboxes at one moment, on a watch on Sandboxes from before the shape's first create (agent-sandbox v1.0.3 can adopt a pool Sandbox and also make one named after the claim from the template).
- **Running → selected**, per shape: a warm task's NetworkPolicy selects its pod by agents.x-k8s.io/claim-uid=<claim UID>; on a watch on the namespace's pods, a task's pod is selected the first moment a pod carried that label with its claim's UID and was Ready=True. The figure is max(0, selected − Running) per task; "Running before selected" counts tasks whose Running was seen strictly before; a task whose pod was never selected by the end is a miss, left out of the percentiles.
- **The cold path**: the same operator, then, in namespace %s, a Workspace like the one above without a pool and a burst of %d tasks paced the same way, create sent → first seen Running on a watch, while the warm tasks still run.
- **Stages**: the operator's own histogram caliban_task_start_duration_seconds{launch="warm"} read at the end, sum / count per stage, on the operator's clock (docs/observability.md#start-latency).
- **CPU, syncs, requests per task**: as in the other modes, over the burst.
`, r.warm.nodes, warmVolumes(cfg.N), bareNamespace, cfg.N, cfg.N, cfg.N, cfg.CreateConcurrency, cfg.BurstSpread, cfg.N, cfg.N, cfg.CreateConcurrency, cfg.BurstSpread, cfg.N, cfg.BurstSpread, cfg.N, cfg.N, cfg.CreateConcurrency, coldNamespace, cfg.N)
}

// warmVolumes is how many PersistentVolumes a warm run needs: two pools,
// each filled and refilled once, the operator's refilled again after the
// all-at-once shape, and the cold burst.
func warmVolumes(n int) int {
	return 6*n + 20
}

// profileAPIServer starts a CPU profile of the apiserver over twice the
// burst's spread, the span of a warm phase's claims or tasks, and returns
// what waits for it and keeps it: where the apiserver's CPU goes is what
// tells agent-sandbox's load from the operator's. A failed profile is
// reported, not fatal.
func (b *bench) profileAPIServer(ctx context.Context, res *Result, phase string) func() {
	path := filepath.Join(b.cfg.ResultsDir, res.Stem+"-"+phase+"-apiserver-cpu.pprof")
	done := make(chan error, 1)
	go func() {
		done <- b.apiserverProfile(ctx, max(1, int(2*b.cfg.BurstSpread.Seconds())), path)
	}()
	return func() {
		b.keepProfile(res, "CPU profile of the apiserver, "+phase, path, <-done)
	}
}

// apiserverRequests is the apiserver's count of every client's requests
// that change something, by verb and resource.
func (b *bench) apiserverRequests(ctx context.Context) (map[string]float64, error) {
	const family = "apiserver_request_total"
	body, err := b.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	m, err := parseMetrics(string(body), family)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range m.by(family, nil, "verb", "group", "resource", "subresource") {
		verb, rest, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		f := strings.Fields(rest)
		// group resource subresource, any of them empty.
		key := verb + " " + strings.Join(f, "/")
		out[key] += v
	}
	return out, nil
}

// writesTable sets the writes of the bare claims beside the operator's
// burst's, per claim and per task: what the operator's path adds to
// agent-sandbox's on the apiserver, whoever sends it.
func (r *Result) writesTable() string {
	n := float64(r.Config.N)
	keys := map[string]bool{}
	for k := range r.warm.bareWrites {
		keys[k] = true
	}
	for k := range r.warm.opWrites {
		keys[k] = true
	}
	all := map[string]float64{}
	for k := range keys {
		all[k] = r.warm.bareWrites[k] + r.warm.opWrites[k]
	}
	var sb strings.Builder
	sb.WriteString("| Verb | Resource | Bare claims, per claim | Operator burst, per task |\n|---|---|---:|---:|\n")
	var bare, op float64
	for _, k := range sortedKeys(all) {
		verb, resource, _ := strings.Cut(k, " ")
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", verb, resource, format(r.warm.bareWrites[k]/n), format(r.warm.opWrites[k]/n))
		bare += r.warm.bareWrites[k]
		op += r.warm.opWrites[k]
	}
	fmt.Fprintf(&sb, "| all | | %s | %s |\n", format(bare/n), format(op/n))
	return sb.String()
}
