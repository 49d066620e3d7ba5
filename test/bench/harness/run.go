// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"golang.org/x/time/rate"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

var sandboxGVR = sandboxv1beta1.SchemeGroupVersion.WithResource(builders.SandboxResource)

// The benchmark's tasks live in one namespace, on one Workspace.
const (
	benchNamespace = "bench"
	workspaceName  = "ws"
	providerSecret = "anthropic-key"
	providerKey    = "api-key"
)

// quietFor is how long the operator must run no sync before a phase counts
// as over: Events and trailing syncs belong to the phase that caused them.
const quietFor = 2 * time.Second

type bench struct {
	cfg     Config
	cluster *framework.Cluster
	// admin, caliban and dynamic are unthrottled admin clients: the
	// harness must not be what limits the creates.
	admin   kubernetes.Interface
	caliban calibanclient.Interface
	dynamic dynamic.Interface
	schemas []flowSchema
	tmp     string
	cancel  context.CancelCauseFunc
	// floorBinary is the bare client (floor.go), built before the run.
	floorBinary string
	// afterRunning, when set, runs as soon as the burst's last task is
	// seen Running, before the burst settles.
	afterRunning func()
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// Run runs the whole benchmark on a cluster of its own and writes the
// report, the plot and the profiles to cfg.ResultsDir. It returns an error
// only when something broke; every number, however bad, is a result.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	cfg = cfg.Defaults()
	if cfg.OperatorBinary == "" || cfg.ResultsDir == "" {
		return nil, errors.New("Config.OperatorBinary and Config.ResultsDir are required")
	}
	size, err := fileMB(cfg.OperatorBinary)
	if err != nil {
		return nil, fmt.Errorf("the operator binary: %w", err)
	}
	if err := os.MkdirAll(cfg.ResultsDir, 0o755); err != nil {
		return nil, err
	}
	stamp := time.Now().UTC()
	res = &Result{Config: cfg, Stamp: stamp, Stem: fmt.Sprintf("%s-n%d", stamp.Format("20060102T150405Z"), cfg.N), operatorBinary: size}
	switch {
	case cfg.Warm:
		res.Stem += "-warm"
	case cfg.RealAgentSandbox:
		res.Stem += "-real"
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &bench{cfg: cfg, cancel: cancel}
	if b.tmp, err = os.MkdirTemp("", "caliban-bench-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			// The operators' logs explain most failures.
			err = fmt.Errorf("%w\n(operator logs kept in %s)", err, b.tmp)
			return
		}
		_ = os.RemoveAll(b.tmp)
	}()

	opts := framework.Options{ImmediateSandbox: true}
	if cfg.RealAgentSandbox {
		opts = framework.Options{RealAgentSandbox: true, AgentSandboxArgs: cfg.AgentSandboxArgs}
	} else if b.floorBinary, err = buildFloor(ctx, b.tmp); err != nil {
		return nil, err
	}
	b.logf("starting a kwokctl cluster")
	started := time.Now()
	b.cluster, err = framework.StartWithOptions(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := b.cluster.Delete(); derr != nil && err == nil {
			err = derr
		}
	}()
	b.logf("cluster %s up in %s", b.cluster.Name, time.Since(started).Round(time.Millisecond))
	if cfg.RealAgentSandbox {
		// One volume per task, of the size the operator's claims ask for
		// by default, so that binding waits for the controller-manager and
		// never for a missing volume.
		storage := config.DefaultAgentSettings().WorkspaceStorage
		size := storage.String()
		volumes := cfg.N
		if cfg.Warm {
			volumes = warmVolumes(cfg.N)
		}
		if err := b.cluster.ProvideVolumes(ctx, "bench", volumes, size); err != nil {
			return nil, err
		}
		b.logf("%d PersistentVolumes of %s provided", volumes, size)
	}
	cfgCopy := rest.CopyConfig(b.cluster.Config)
	cfgCopy.QPS, cfgCopy.Burst = -1, 0 // no client-side rate limit at all
	if b.admin, err = kubernetes.NewForConfig(cfgCopy); err != nil {
		return nil, err
	}
	if b.caliban, err = calibanclient.NewForConfig(cfgCopy); err != nil {
		return nil, err
	}
	if b.dynamic, err = dynamic.NewForConfig(cfgCopy); err != nil {
		return nil, err
	}
	res.Machine = machine(ctx, b.cluster.Root, b.cfg.OperatorBinary, b.admin)

	runPhases := b.run
	switch {
	case cfg.Warm:
		runPhases = b.runWarm
	case cfg.RealAgentSandbox:
		runPhases = b.runReal
	}
	if err := runPhases(ctx, res); err != nil {
		return nil, err
	}
	if err := res.write(); err != nil {
		return nil, err
	}
	return res, nil
}

func (b *bench) run(ctx context.Context, res *Result) error {
	cfg := b.cfg

	// 1. The apiserver's ceiling, before any operator exists.
	b.logf("1/6 apiserver ceiling (%s per measurement)", cfg.CeilingDuration)
	c, err := b.measureCeiling(ctx)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	res.ceiling = c

	kubeconfig, env, err := b.operatorIdentity(ctx, res)
	if err != nil {
		return err
	}

	// 2. Burst and paced arrivals, operator at its defaults.
	b.logf("2/6 burst of %d tasks, then %d at %.0f/s", cfg.N, cfg.Paced, cfg.PacedRate)
	opA, err := b.start(ctx, "burst", env...)
	if err != nil {
		return err
	}
	defer func() { _ = opA.Stop() }()
	// The bare client's namespace is prepared now too: its Workspace is
	// validated by this operator, which never sees a task there.
	for _, ns := range []string{benchNamespace, floorNamespace} {
		if err := b.prepareNamespace(ctx, ns); err != nil {
			return err
		}
	}
	obs, err := b.observe(ctx, benchNamespace)
	if err != nil {
		return err
	}
	if err := b.burst(ctx, opA, obs, res); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if err := b.paced(ctx, obs, res); err != nil {
		return fmt.Errorf("paced: %w", err)
	}
	if err := opA.Stop(); err != nil {
		return err
	}
	total := cfg.N + cfg.Paced

	// 4. Cold start with every task Running, operator at its defaults.
	b.logf("3/6 cold start with %d tasks Running", total)
	if err := b.coldStart(ctx, env, total, res); err != nil {
		return fmt.Errorf("cold start: %w", err)
	}

	// 3. Steady state under a forced resync: the one setting that is not
	// the default, because at the default (300 s) a window holding one
	// resync would take most of 8 minutes.
	b.logf("4/6 steady state, CALIBAN_RESYNC_SECONDS=%d, over %s", cfg.ResyncSeconds, cfg.SteadyWindow)
	if err := b.steady(ctx, append(env, "CALIBAN_RESYNC_SECONDS="+strconv.Itoa(cfg.ResyncSeconds)), total, res); err != nil {
		return fmt.Errorf("steady state: %w", err)
	}
	// 5. The floor: the same burst taken to Running by a bare client that
	// sends the same requests and nothing else.
	b.logf("5/6 burst of %d tasks, bare client", cfg.N)
	if err := b.floor(ctx, kubeconfig, res); err != nil {
		return fmt.Errorf("bare client: %w", err)
	}
	b.logf("6/6 writing the report")
	return nil
}

// start runs an operator and makes its unexpected exit fail the run.
func (b *bench) start(_ context.Context, name string, env ...string) (*operatorProcess, error) {
	p, err := startOperator(name, b.cfg.OperatorBinary, filepath.Join(b.tmp, "operator-"+name+".log"), env...)
	if err != nil {
		return nil, err
	}
	p.watchExit(b.cancel)
	return p, nil
}

// prepareNamespace creates the namespace, the provider Secret and the
// Workspace every task refers to, and waits until the operator has
// validated the Workspace.
func (b *bench) prepareNamespace(ctx context.Context, namespace string, mods ...func(*calibanv1alpha1.WorkspaceSpec)) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: providerSecret}, StringData: map[string]string{providerKey: "sk-ant-bench"}}
	if _, err := b.admin.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return err
	}
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: workspaceName},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "Benchmark workspace",
			Sources: []calibanv1alpha1.Source{{
				Name: "caliban", Repo: "https://github.com/caliban-ai/caliban.git", Ref: "main", Path: "/work/caliban",
			}},
			Providers: []calibanv1alpha1.Provider{{
				Name: "planner", Kind: "anthropic", Model: "claude-sonnet-4-5",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: providerSecret, Key: providerKey},
			}},
		},
	}
	for _, m := range mods {
		m(&ws.Spec)
	}
	if _, err := b.caliban.CalibanV1alpha1().Workspaces(namespace).Create(ctx, ws, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := b.caliban.CalibanV1alpha1().Workspaces(namespace).Get(ctx, workspaceName, metav1.GetOptions{})
		if err == nil && got.Status.Phase == calibanv1alpha1.WorkspaceReady && got.Status.ObservedGeneration == got.Generation {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Workspace was not Ready within a minute (last error %v, status %+v)", err, got)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snapshot is what the phases take differences of.
type snapshot struct {
	at   time.Time
	apf  apfCounts
	op   samples
	cpu  time.Duration
	host hostCPU
}

func (b *bench) snap(ctx context.Context, op *operatorProcess) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if s.cpu, err = op.cpu(); err != nil {
		return s, err
	}
	if s.host, err = b.hostCPU(); err != nil {
		return s, err
	}
	if s.op, err = op.metrics(ctx); err != nil {
		return s, err
	}
	s.apf, err = b.apiserverFlows(ctx)
	return s, err
}

// settle waits until the operator has run no sync and sent no request but
// lease renewals for quietFor, and its queues are empty, scraping only the
// operator.
func (b *bench) settle(ctx context.Context, op *operatorProcess, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, since := -1.0, time.Now()
	for {
		m, err := op.metrics(ctx)
		if err != nil {
			return err
		}
		// Syncs, and requests other than the lease renewals (PUT) that
		// go on every few seconds: Events are written after the sync that
		// emitted them, by a client of their own.
		work := m.sum("caliban_controller_syncs_total", nil) +
			m.sum("rest_client_requests_total", nil) - m.sum("rest_client_requests_total", map[string]string{"method": "PUT"})
		depth := m.sum("workqueue_depth", nil)
		if work != last || depth > 0 {
			last, since = work, time.Now()
		} else if time.Since(since) >= quietFor {
			return nil
		}
		if time.Now().After(deadline) {
			b.logf("  the operator was still syncing after %s; measuring anyway", limit)
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// createTasks creates the named tasks at most perSecond per second with
// conc creates in flight, and records when each create was sent.
func (b *bench) createTasks(ctx context.Context, namespace string, names []string, perSecond float64, conc int) ([]time.Time, error) {
	return sendPaced(ctx, len(names), perSecond, conc, func(ctx context.Context, i int) error {
		task := &calibanv1alpha1.CalibanTask{
			ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			Spec: calibanv1alpha1.CalibanTaskSpec{
				WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: workspaceName},
				Task:         calibanv1alpha1.TaskDefinition{Prompt: "Summarise the repository layout in README form."},
			},
		}
		if _, err := b.caliban.CalibanV1alpha1().CalibanTasks(namespace).Create(ctx, task, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CalibanTask %s: %w", names[i], err)
		}
		return nil
	})
}

// sendPaced calls send for 0..n-1 at perSecond, conc at a time, and
// returns when each call started; the first error stops it.
func sendPaced(ctx context.Context, n int, perSecond float64, conc int, send func(context.Context, int) error) ([]time.Time, error) {
	sent := make([]time.Time, n)
	limiter := rate.NewLimiter(rate.Limit(perSecond), 1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := range next {
				sent[i] = time.Now()
				if err := send(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := range n {
		if limiter.Wait(ctx) != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return sent, context.Cause(ctx)
}

func taskNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return names
}

func (b *bench) burst(ctx context.Context, op *operatorProcess, obs *observer, res *Result) error {
	cfg := b.cfg
	before, err := b.snap(ctx, op)
	if err != nil {
		return err
	}
	idleRSS, err := op.rss()
	if err != nil {
		return err
	}
	// The operator is running and has been attributed requests (its
	// informers' lists and watches): otherwise the FlowSchemas count
	// nothing and every per-task figure would read 0.
	if b.totals(apfCounts{}, before.apf).reads == 0 {
		return fmt.Errorf("the apiserver attributed no request to the operator's ServiceAccount (%s by flow_schema): APF is off or the FlowSchemas do not match", apfDispatched)
	}

	// The CPU profile runs alongside the burst; the pprof endpoint is
	// optional, so a failure is reported, not fatal. A real run takes
	// none: its question is where the start's time goes, not the
	// operator's code.
	profiles := !cfg.RealAgentSandbox
	cpuPath := filepath.Join(cfg.ResultsDir, res.Stem+"-cpu.pprof")
	profileDone := make(chan error, 1)
	if profiles {
		go func() {
			secs := int(cfg.CPUProfile.Seconds())
			profileDone <- op.profile(ctx, "profile", "seconds="+strconv.Itoa(secs), cpuPath, cfg.CPUProfile+30*time.Second)
		}()
	}

	var apiserverProfiled func()
	if cfg.Warm {
		apiserverProfiled = b.profileAPIServer(ctx, res, "warm-burst")
	}
	names := taskNames("t", cfg.N)
	sent, err := b.createTasks(ctx, benchNamespace, names, float64(cfg.N)/cfg.BurstSpread.Seconds(), cfg.CreateConcurrency)
	if err != nil {
		return err
	}
	createsDone := time.Now()
	b.logf("  %d creates sent in %s", cfg.N, createsDone.Sub(sent[0]).Round(time.Millisecond))
	if err := obs.waitRunning(ctx, b, names, cfg.RunningTimeout); err != nil {
		return err
	}
	running := obs.runningAt(names)
	if b.afterRunning != nil {
		b.afterRunning()
	}
	b.logf("  all %d Running %s after the first create", cfg.N, slices.MaxFunc(running, time.Time.Compare).Sub(sent[0]).Round(time.Millisecond))
	if err := b.settle(ctx, op, time.Minute); err != nil {
		return err
	}
	after, err := b.snap(ctx, op)
	if err != nil {
		return err
	}
	rss, err := op.peakRSS()
	if err != nil {
		return err
	}
	if apiserverProfiled != nil {
		apiserverProfiled()
	}
	if profiles {
		heapPath := filepath.Join(cfg.ResultsDir, res.Stem+"-heap.pprof")
		b.keepProfile(res, "heap profile", heapPath, op.profile(ctx, "heap", "", heapPath, 30*time.Second))
		b.keepProfile(res, "CPU profile", cpuPath, <-profileDone)
	}

	toCreated, toReady := obs.sandboxTimes(names, sent)
	res.burst = phaseResult{
		names: names, sent: sent, running: running,
		readyToRunning: obs.readyToRunning(names),
		toSandbox:      toCreated, sandboxToReady: toReady,
		createsTook: createsDone.Sub(sent[0]),
		before:      before, after: after,
		apf:     b.totals(before.apf, after.apf),
		peakRSS: rss, idleRSS: idleRSS,
	}
	return nil
}

func (b *bench) paced(ctx context.Context, obs *observer, res *Result) error {
	cfg := b.cfg
	names := taskNames("p", cfg.Paced)
	sent, err := b.createTasks(ctx, benchNamespace, names, cfg.PacedRate, cfg.CreateConcurrency)
	if err != nil {
		return err
	}
	if err := obs.waitRunning(ctx, b, names, cfg.RunningTimeout); err != nil {
		return err
	}
	toCreated, toReady := obs.sandboxTimes(names, sent)
	res.paced = phaseResult{
		names: names, sent: sent, running: obs.runningAt(names),
		readyToRunning: obs.readyToRunning(names),
		toSandbox:      toCreated, sandboxToReady: toReady,
		createsTook: time.Since(sent[0]),
	}
	return nil
}

// coldStart runs a fresh operator at its defaults over tasks that are all
// Running and measures how soon it is ready and working, and what its
// start-up costs the apiserver.
func (b *bench) coldStart(ctx context.Context, env []string, total int, res *Result) error {
	before, err := b.apiserverFlows(ctx)
	if err != nil {
		return err
	}
	hostStart, err := b.hostCPU()
	if err != nil {
		return err
	}
	op, err := b.start(ctx, "cold-start", env...)
	if err != nil {
		return err
	}
	defer func() { _ = op.Stop() }()
	// The start's CPU profile begins as soon as the pprof endpoint answers,
	// a few milliseconds into the process, and outlasts the start itself
	// (idle time adds no samples).
	cpuPath := filepath.Join(b.cfg.ResultsDir, res.Stem+"-coldstart-cpu.pprof")
	profileDone := make(chan error, 1)
	go func() {
		profileDone <- op.profileFromStart(ctx, max(1, int(b.cfg.ColdStartProfile.Seconds())), cpuPath)
	}()
	// The apiserver's side of the same start: what serving the operator's
	// lists and watches costs it, which the operator's profile cannot show.
	apiPath := filepath.Join(b.cfg.ResultsDir, res.Stem+"-coldstart-apiserver-cpu.pprof")
	apiDone := make(chan error, 1)
	go func() {
		apiDone <- b.apiserverProfile(ctx, max(1, int(b.cfg.ColdStartProfile.Seconds())), apiPath)
	}()
	cs, err := b.waitStarted(ctx, op, total, &hostStart)
	if err != nil {
		return err
	}
	b.keepProfile(res, "cold-start CPU profile", cpuPath, <-profileDone)
	b.keepProfile(res, "cold-start CPU profile of the apiserver", apiPath, <-apiDone)
	after, err := b.apiserverFlows(ctx)
	if err != nil {
		return err
	}
	if cs.cpu, err = op.cpu(); err != nil {
		return err
	}
	cs.apf = b.totals(before, after)
	res.cold = cs
	return op.Stop()
}

// keepProfile records the profile at path when err is nil (the profiles
// are optional: an operator may serve no pprof endpoint); otherwise it says
// so and removes whatever was written.
func (b *bench) keepProfile(res *Result, what, path string, err error) {
	if err != nil {
		b.logf("  no %s: %v", what, err)
		_ = os.Remove(path)
		return
	}
	res.Profiles = append(res.Profiles, path)
}

// coldStartResult is what coldStart measures, as durations since the
// process started.
type coldStartResult struct {
	// leading is when the operator first reported holding the lease: what
	// lies between it and synced is the caches' lists.
	leading, synced, firstSync, allSynced time.Duration
	// host is the machine's CPU from the operator's start until its caches
	// synced: whether the wait was for CPU or for something else.
	host hostShare
	cpu  time.Duration
	apf  totals
}

// waitStarted polls the operator (never the apiserver) every 100 ms until
// it leads with synced caches, has synced once, and has synced at least
// total tasks, then waits until it is quiet. With hostStart, the machine's
// CPU from then until the caches synced is recorded too.
func (b *bench) waitStarted(ctx context.Context, op *operatorProcess, total int, hostStart *hostCPU) (coldStartResult, error) {
	var cs coldStartResult
	deadline := time.Now().Add(b.cfg.RunningTimeout)
	for cs.synced == 0 || cs.firstSync == 0 || cs.allSynced == 0 {
		if time.Now().After(deadline) {
			return cs, fmt.Errorf("operator %s not started within %s: %+v", op.Name, b.cfg.RunningTimeout, cs)
		}
		select {
		case <-ctx.Done():
			return cs, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
		m, err := op.metrics(ctx)
		if err != nil {
			continue // not listening yet
		}
		now := time.Since(op.Started)
		syncs := m.sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"})
		if cs.firstSync == 0 && syncs > 0 {
			cs.firstSync = now
		}
		if cs.allSynced == 0 && syncs >= float64(total) {
			cs.allSynced = now
		}
		// A standby answers /readyz with 200 too: only a leader's 200 says
		// its caches synced. Leadership is taken from a scrape before the
		// /readyz request, so the 200 cannot predate it.
		if cs.leading == 0 && m.sum("leader_election_master_status", nil) > 0 {
			cs.leading = now
		}
		if cs.synced == 0 && cs.leading != 0 {
			if code, _, err := op.get(ctx, op.MetricsAddr, "/readyz", 5*time.Second); err == nil && code == http.StatusOK {
				cs.synced = time.Since(op.Started)
				if hostStart != nil {
					if h, err := b.hostCPU(); err == nil {
						cs.host = hostDelta(*hostStart, h, cs.synced)
					}
				}
			}
		}
	}
	return cs, b.settle(ctx, op, time.Minute)
}

// steadyResult is what the operator does, over a window, to tasks that are
// all Running while the informers resync them.
type steadyResult struct {
	window time.Duration
	syncs  float64
	cpu    time.Duration
	apf    totals
}

func (b *bench) steady(ctx context.Context, env []string, total int, res *Result) error {
	op, err := b.start(ctx, "steady", env...)
	if err != nil {
		return err
	}
	defer func() { _ = op.Stop() }()
	if _, err := b.waitStarted(ctx, op, total, nil); err != nil {
		return err
	}
	before, err := b.snap(ctx, op)
	if err != nil {
		return err
	}
	// A CPU profile of the window shows what a sync that changes nothing
	// costs; like every profile it is optional.
	cpuPath := filepath.Join(b.cfg.ResultsDir, res.Stem+"-steady-cpu.pprof")
	profileDone := make(chan error, 1)
	go func() {
		secs := max(1, int(b.cfg.SteadyWindow.Seconds()))
		profileDone <- op.profile(ctx, "profile", "seconds="+strconv.Itoa(secs), cpuPath, b.cfg.SteadyWindow+30*time.Second)
	}()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(b.cfg.SteadyWindow):
	}
	after, err := b.snap(ctx, op)
	if err != nil {
		return err
	}
	b.keepProfile(res, "steady-state CPU profile", cpuPath, <-profileDone)
	res.steady = steadyResult{
		window: after.at.Sub(before.at),
		syncs: after.op.sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"}) -
			before.op.sum("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"}),
		cpu: after.cpu - before.cpu,
		apf: b.totals(before.apf, after.apf),
	}
	return op.Stop()
}

// operatorIdentity installs the operator's identity and RBAC and the
// FlowSchemas that count its requests on the apiserver, and returns what
// the operator's environment requires and nothing else: how to reach the
// cluster and where the lease lives (in a pod, the downward API says);
// and the kubeconfig of that identity, which the bare client uses too.
func (b *bench) operatorIdentity(ctx context.Context, res *Result) (kubeconfig string, env []string, err error) {
	rules, err := b.installOperatorRBAC(ctx)
	if err != nil {
		return "", nil, err
	}
	if b.schemas, err = b.installFlowSchemas(ctx, rules); err != nil {
		return "", nil, err
	}
	res.schemas = b.schemas
	if kubeconfig, err = b.cluster.OperatorKubeconfig(ctx, b.tmp, 24*time.Hour); err != nil {
		return "", nil, err
	}
	return kubeconfig, []string{"KUBECONFIG=" + kubeconfig, "CALIBAN_LEASE_NAMESPACE=" + framework.OperatorNamespace}, nil
}
