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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

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
	queues       *queueMetrics
	phases       *phaseCollector
}

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
		queues: newQueueMetrics(),
		phases: &phaseCollector{},
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.syncs, m.syncErrors, m.syncDuration, m.phases)
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

// SetPhaseListers points the gauges of tasks and workspaces by phase at the
// current term's caches; nil listers (no term running: a standby) export
// nothing. The gauges are read from the listers at scrape time, so they
// cannot drift from the cache.
func (m *Metrics) SetPhaseListers(tasks calibanlisters.CalibanTaskLister, workspaces calibanlisters.WorkspaceLister) {
	if tasks == nil || workspaces == nil {
		m.phases.listers.Store(nil)
		return
	}
	m.phases.listers.Store(&phaseListers{tasks: tasks, workspaces: workspaces})
}

var (
	taskPhaseDesc      = prometheus.NewDesc("caliban_tasks", "CalibanTasks by status.phase (empty before the first status).", []string{"phase"}, nil)
	workspacePhaseDesc = prometheus.NewDesc("caliban_workspaces", "Workspaces by status.phase (empty before the first status).", []string{"phase"}, nil)
)

type phaseCollector struct {
	listers atomic.Pointer[phaseListers]
}

type phaseListers struct {
	tasks      calibanlisters.CalibanTaskLister
	workspaces calibanlisters.WorkspaceLister
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- taskPhaseDesc
	ch <- workspacePhaseDesc
}

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.listers.Load()
	if l == nil {
		return
	}
	counts := map[string]int{}
	if tasks, err := l.tasks.List(labels.Everything()); err == nil {
		for _, t := range tasks {
			counts[string(t.Status.Phase)]++
		}
	}
	for _, phase := range []string{"", "Pending", "Provisioning", "Running", "Suspended", "Draining", "Completed", "Failed"} {
		ch <- prometheus.MustNewConstMetric(taskPhaseDesc, prometheus.GaugeValue, float64(counts[phase]), phase)
	}
	counts = map[string]int{}
	if wss, err := l.workspaces.List(labels.Everything()); err == nil {
		for _, ws := range wss {
			counts[string(ws.Status.Phase)]++
		}
	}
	for _, phase := range []string{"", "Pending", "Ready", "Failed"} {
		ch <- prometheus.MustNewConstMetric(workspacePhaseDesc, prometheus.GaugeValue, float64(counts[phase]), phase)
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
			RequestResult:      resultAdapter{requests},
			RequestLatency:     latencyAdapter{latency},
			RateLimiterLatency: latencyAdapter{throttle},
		})
		leaderelection.SetProvider(leaderProvider{leader})
	})
}

type resultAdapter struct{ v *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.v.WithLabelValues(code, method, host).Inc()
}

type latencyAdapter struct{ v *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.v.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type leaderProvider struct{ v *prometheus.GaugeVec }

func (p leaderProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric(p) }

type leaderMetric struct{ v *prometheus.GaugeVec }

func (m leaderMetric) On(name string)           { m.v.WithLabelValues(name).Set(1) }
func (m leaderMetric) Off(name string)          { m.v.WithLabelValues(name).Set(0) }
func (m leaderMetric) SlowpathExercised(string) {}
