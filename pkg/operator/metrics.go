// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanlisters "github.com/caliban-ai/caliban-operator/pkg/generated/listers/caliban/v1alpha1"
)

// Metrics is the operator's Prometheus registry and the metrics it records
// itself. Workqueue, REST client and leader-election metrics are client-go's
// own, routed into the same registry.
type Metrics struct {
	Registry *prometheus.Registry

	syncs        *prometheus.CounterVec
	syncErrors   *prometheus.CounterVec
	syncDuration *prometheus.HistogramVec
	startStages  *prometheus.HistogramVec
	transitions  *prometheus.CounterVec
	duplicates   prometheus.Counter
	queues       *queueMetrics
	term         *termCollector
}

// startBuckets span what a start takes: tens of milliseconds for the
// operator's own stages (make bench: Sandbox Ready → Running p50 18 ms,
// p99 0.5 s), seconds to minutes for a pod to be scheduled, pull its image
// and clone its sources.
var startBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// NewMetrics creates a registry with the process and Go collectors and the
// operator's own metrics.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caliban_controller_syncs_total", Help: "Syncs run, by controller and result (success or error).",
		}, []string{"controller", "result"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caliban_controller_sync_errors_total", Help: "Syncs that returned an error and were requeued with backoff.",
		}, []string{"controller"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "caliban_controller_sync_duration_seconds", Help: "How long one sync took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"controller"}),
		startStages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "caliban_task_start_duration_seconds",
			Help:    "How long each stage of a task's first start took (created_to_pinned, pinned_to_children_applied, children_applied_to_sandbox_ready, sandbox_ready_to_running) and the whole (created_to_running), by launch: warm (a Sandbox taken from a warm pool) or cold.",
			Buckets: startBuckets,
		}, []string{"stage", "launch"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caliban_task_phase_transitions_total",
			Help: "Phase changes the operator wrote into tasks' status, by phase before (empty: the first status), phase after, and the Ready condition's reason.",
		}, []string{"from", "to", "reason"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "caliban_warm_duplicate_sandboxes_total",
			Help: "Sandboxes agent-sandbox made for a warm task's claim beside the one the claim names, which the operator deleted (an adoption race of agent-sandbox before v1.0.5).",
		}),
		queues: newQueueMetrics(),
		term:   &termCollector{now: time.Now},
	}
	// Every series the alerts and the dashboard read exports from the
	// start, so they see zero rather than nothing on a healthy operator:
	// both controllers' syncs and errors, the moves of a healthy start,
	// and every stage of a start.
	for _, controller := range []string{WorkspaceControllerName, TaskControllerName} {
		m.syncs.WithLabelValues(controller, "success")
		m.syncs.WithLabelValues(controller, "error")
		m.syncErrors.WithLabelValues(controller)
	}
	m.transitions.WithLabelValues("", string(calibanv1alpha1.TaskProvisioning), builders.ReasonSandboxNotReady)
	m.transitions.WithLabelValues(string(calibanv1alpha1.TaskProvisioning), string(calibanv1alpha1.TaskRunning), builders.ReasonRunning)
	for _, stage := range builders.StartStages {
		for _, launch := range []string{builders.LaunchTypeWarm, builders.LaunchTypeCold} {
			m.startStages.WithLabelValues(stage, launch)
		}
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.syncs, m.syncErrors, m.syncDuration, m.startStages, m.transitions, m.duplicates, m.term)
	m.queues.register(reg)
	return m
}

// RegisterBuildInfo exports caliban_build_info, always 1, labelled with the
// binary's version and commit and the Go release it was built with: a
// dashboard can show which release each replica runs, and an alert can
// catch a fleet left on two releases after an upgrade.
func (m *Metrics) RegisterBuildInfo(version, commit string) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "caliban_build_info",
		Help: "Always 1; the labels say which build of the operator runs.",
		ConstLabels: prometheus.Labels{
			"version": version, "commit": commit, "goversion": runtime.Version(),
		},
	})
	info.Set(1)
	m.Registry.MustRegister(info)
}

// WorkqueueProvider feeds the named queues' metrics into this registry.
func (m *Metrics) WorkqueueProvider() workqueue.MetricsProvider { return m.queues }

func (m *Metrics) observeSync(controller string, took time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
		m.syncErrors.WithLabelValues(controller).Inc()
	}
	m.syncs.WithLabelValues(controller, result).Inc()
	m.syncDuration.WithLabelValues(controller).Observe(took.Seconds())
}

// observeWarmDuplicate counts a duplicate Sandbox of a warm task deleted.
func (m *Metrics) observeWarmDuplicate() { m.duplicates.Inc() }

// observeTransition counts a phase change the operator wrote.
func (m *Metrics) observeTransition(from, to calibanv1alpha1.TaskPhase, reason string) {
	m.transitions.WithLabelValues(string(from), string(to), reason).Inc()
}

// observeStart records the stages of a task's first start.
func (m *Metrics) observeStart(launch string, stages []builders.StageDuration) {
	for _, s := range stages {
		m.startStages.WithLabelValues(s.Stage, launch).Observe(s.Duration.Seconds())
	}
}

// Term is what the gauges read from the current leadership term: its task
// and Workspace caches, and whether agent-sandbox's API is served.
type Term struct {
	Tasks         calibanlisters.CalibanTaskLister
	Workspaces    calibanlisters.WorkspaceLister
	SandboxServed func() bool
}

// SetTerm points the gauges at the current term; nil (no term running: a
// standby) exports none of them. They are read at scrape time, so they
// cannot drift from the cache.
func (m *Metrics) SetTerm(t *Term) { m.term.current.Store(t) }

var (
	taskPhaseDesc      = prometheus.NewDesc("caliban_tasks", "CalibanTasks by status.phase (empty before the first status).", []string{"phase"}, nil)
	taskOldestDesc     = prometheus.NewDesc("caliban_task_oldest_seconds", "Seconds the oldest task in each phase has been in it, counted from its status.phaseTransitionTime (from its Ready condition's last transition, or its creation, when it has none); 0 for an empty phase.", []string{"phase"}, nil)
	workspacePhaseDesc = prometheus.NewDesc("caliban_workspaces", "Workspaces by status.phase (empty before the first status).", []string{"phase"}, nil)
	sandboxAPIDesc     = prometheus.NewDesc("caliban_sandbox_api_available", "1 while agent-sandbox's Sandbox API is served, else 0 (tasks wait in Provisioning).", nil, nil)
)

var taskPhases = []calibanv1alpha1.TaskPhase{"", calibanv1alpha1.TaskPending, calibanv1alpha1.TaskProvisioning, calibanv1alpha1.TaskRunning,
	calibanv1alpha1.TaskSuspended, calibanv1alpha1.TaskDraining, calibanv1alpha1.TaskCompleted, calibanv1alpha1.TaskFailed}

type termCollector struct {
	current atomic.Pointer[Term]
	now     func() time.Time
}

func (c *termCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- taskPhaseDesc
	ch <- taskOldestDesc
	ch <- workspacePhaseDesc
	ch <- sandboxAPIDesc
}

func (c *termCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.current.Load()
	if l == nil {
		return
	}
	now := c.now()
	counts := map[calibanv1alpha1.TaskPhase]int{}
	oldest := map[calibanv1alpha1.TaskPhase]time.Duration{}
	if tasks, err := l.Tasks.List(labels.Everything()); err == nil {
		for _, t := range tasks {
			phase := t.Status.Phase
			counts[phase]++
			since := t.CreationTimestamp.Time
			switch ready := meta.FindStatusCondition(t.Status.Conditions, builders.ConditionReady); {
			case t.Status.PhaseTransitionTime != nil:
				since = t.Status.PhaseTransitionTime.Time
			case ready != nil:
				// A task whose phase was written before the operator
				// recorded when: its Ready's transition is the best left.
				since = ready.LastTransitionTime.Time
			}
			oldest[phase] = max(oldest[phase], now.Sub(since))
		}
	}
	for _, phase := range taskPhases {
		ch <- prometheus.MustNewConstMetric(taskPhaseDesc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
		if phase != "" {
			ch <- prometheus.MustNewConstMetric(taskOldestDesc, prometheus.GaugeValue, oldest[phase].Seconds(), string(phase))
		}
	}
	served := 0.0
	if l.SandboxServed != nil && l.SandboxServed() {
		served = 1
	}
	ch <- prometheus.MustNewConstMetric(sandboxAPIDesc, prometheus.GaugeValue, served)
	wsCounts := map[string]int{}
	if wss, err := l.Workspaces.List(labels.Everything()); err == nil {
		for _, ws := range wss {
			wsCounts[string(ws.Status.Phase)]++
		}
	}
	for _, phase := range []string{"", "Pending", "Ready", "Failed"} {
		ch <- prometheus.MustNewConstMetric(workspacePhaseDesc, prometheus.GaugeValue, float64(wsCounts[phase]), phase)
	}
}

// queueMetrics implements client-go's workqueue.MetricsProvider on
// Prometheus vectors labelled by queue name.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newQueueMetrics() *queueMetrics {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	return &queueMetrics{
		depth:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the workqueue."}, []string{"name"}),
		unfinished:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		longest:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor has been running."}, []string{"name"}),
		adds:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the workqueue."}, []string{"name"}),
		retries:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Rate-limited retries handled by the workqueue."}, []string{"name"}),
		latency:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "Seconds an item waits in the queue before it is processed.", Buckets: buckets}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "Seconds processing an item takes.", Buckets: buckets}, []string{"name"}),
	}
}

func (q *queueMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(q.depth, q.unfinished, q.longest, q.adds, q.retries, q.latency, q.workDuration)
}

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}
func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name)
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}
func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}

var registerClientMetricsOnce sync.Once

// RegisterClientMetrics routes client-go's process-wide REST client and
// leader-election metrics into reg. client-go accepts one registration per
// process; later calls do nothing.
func RegisterClientMetrics(reg prometheus.Registerer) {
	registerClientMetricsOnce.Do(func() {
		requests := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "HTTP requests to the apiserver, by status code, method and host.",
		}, []string{"code", "method", "host"})
		latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "Request latency to the apiserver, by verb and host.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"verb", "host"})
		throttle := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Help: "Time requests waited on the client-side rate limiter (CALIBAN_KUBE_API_QPS/BURST).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"verb", "host"})
		leader := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status", Help: "1 while this process holds the named lease, else 0.",
		}, []string{"name"})
		reg.MustRegister(requests, latency, throttle, leader)
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:      newResultAdapter(requests),
			RequestLatency:     newLatencyAdapter(latency),
			RateLimiterLatency: newLatencyAdapter(throttle),
		})
		leaderelection.SetProvider(leaderProvider{leader})
	})
}

// resultAdapter and latencyAdapter hand client-go's request metrics to
// Prometheus. Each keeps its metrics by label values, a handful in all
// (codes and verbs of one host): a request finds its metric in a map
// instead of having the vector check and hash its labels again.
type resultAdapter struct {
	counters *byLabels[[3]string, prometheus.Counter]
}

func newResultAdapter(v *prometheus.CounterVec) resultAdapter {
	return resultAdapter{newByLabels(func(k [3]string) prometheus.Counter { return v.WithLabelValues(k[0], k[1], k[2]) })}
}

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.counters.get([3]string{code, method, host}).Inc()
}

type latencyAdapter struct {
	observers *byLabels[[2]string, prometheus.Observer]
}

func newLatencyAdapter(v *prometheus.HistogramVec) latencyAdapter {
	return latencyAdapter{newByLabels(func(k [2]string) prometheus.Observer { return v.WithLabelValues(k[0], k[1]) })}
}

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.observers.get([2]string{verb, u.Host}).Observe(d.Seconds())
}

// byLabels keeps the metrics of one vector by their label values, made by
// with on first use.
type byLabels[K comparable, M any] struct {
	with func(K) M
	mu   sync.RWMutex
	m    map[K]M
}

func newByLabels[K comparable, M any](with func(K) M) *byLabels[K, M] {
	return &byLabels[K, M]{with: with, m: map[K]M{}}
}

func (b *byLabels[K, M]) get(k K) M {
	b.mu.RLock()
	m, ok := b.m[k]
	b.mu.RUnlock()
	if ok {
		return m
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.m[k]; ok {
		return m
	}
	m = b.with(k)
	b.m[k] = m
	return m
}

type leaderProvider struct{ v *prometheus.GaugeVec }

func (p leaderProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric(p) }

type leaderMetric struct{ v *prometheus.GaugeVec }

func (m leaderMetric) On(name string)           { m.v.WithLabelValues(name).Set(1) }
func (m leaderMetric) Off(name string)          { m.v.WithLabelValues(name).Set(0) }
func (m leaderMetric) SlowpathExercised(string) {}
