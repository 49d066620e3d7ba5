// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"cmp"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Result is one run's measurements and where they were written.
type Result struct {
	Config Config
	Stamp  time.Time
	// Stem names the run's files: <UTC date-time>-n<N>.
	Stem    string
	Machine []string

	// Table is the main table, Markdown is the whole report.
	Table    string
	Markdown string
	// Report and Plot are the files written; Profiles the pprof files
	// collected (none when the operator serves no pprof endpoint).
	Report, Latest, Plot string
	Profiles             []string

	schemas []flowSchema
	// real is the stages of a run through agent-sandbox's controller.
	real realResult
	// warm is the warm variant's own figures.
	warm    warmResult
	ceiling ceiling
	burst   phaseResult
	paced   phaseResult
	cold    coldStartResult
	steady  steadyResult
	floor   floorResult
	// operatorBinary is the size of the operator's binary, in MB.
	operatorBinary float64
}

// phaseResult is a batch of tasks: when each create was sent and each task
// first seen Running, in the order of names.
type phaseResult struct {
	names          []string
	sent, running  []time.Time
	readyToRunning []time.Duration
	// toSandbox is create → Sandbox first seen (the operator's first
	// sync, with its queue wait); sandboxToReady is Sandbox first seen →
	// Ready (the stand-in for agent-sandbox, not the operator).
	toSandbox, sandboxToReady []time.Duration
	createsTook               time.Duration
	before, after             snapshot
	apf                       totals
	// idleRSS is the operator's resident set before the burst: the
	// binary's pages and an empty cache.
	peakRSS, idleRSS float64
}

func (p phaseResult) createToRunning() []time.Duration {
	out := make([]time.Duration, len(p.names))
	for i := range p.names {
		out[i] = p.running[i].Sub(p.sent[i])
	}
	return out
}

// throughput is tasks per second from the first create sent to the last
// task seen Running.
func (p phaseResult) throughput() float64 {
	first := slices.MinFunc(p.sent, time.Time.Compare)
	last := slices.MaxFunc(p.running, time.Time.Compare)
	return float64(len(p.names)) / last.Sub(first).Seconds()
}

// opDelta is a counter of the operator's /metrics over the phase.
func (p phaseResult) opDelta(name string, labels map[string]string) float64 {
	return p.after.op.sum(name, labels) - p.before.op.sum(name, labels)
}

func (p phaseResult) opDeltaBy(name string, labels map[string]string, by ...string) map[string]float64 {
	return delta(p.before.op.by(name, labels, by...), p.after.op.by(name, labels, by...))
}

// percentile is the nearest-rank percentile q (0-100) of ds, in ms.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q/100+0.999999) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type row struct {
	phase, measure string
	value          float64
	unit           string
}

// rows is the main table.
func (r *Result) rows() []row {
	cfg := r.Config
	c, bu, pa, st, co := r.ceiling, r.burst, r.paced, r.steady, r.cold
	n := float64(cfg.N)
	conc := strconv.Itoa(cfg.CeilingConcurrency)
	leaseWrites := 0.0
	for k, v := range st.apf.bySchema {
		if strings.Contains(k, "leases") && !strings.Contains(k, "-get-") {
			leaseWrites += v
		}
	}
	ceil := "ceiling"
	burst := fmt.Sprintf("burst of %d", cfg.N)
	paced := fmt.Sprintf("paced, %d at %g/s", cfg.Paced, cfg.PacedRate)
	steady := fmt.Sprintf("steady, resync %ds", cfg.ResyncSeconds)
	cold := fmt.Sprintf("cold start, %d tasks", cfg.N+cfg.Paced)
	floorStart := fmt.Sprintf("bare client, start over %d tasks", cfg.N+cfg.Paced)
	floor := fmt.Sprintf("bare client, burst of %d", cfg.N)
	floorPaced := fmt.Sprintf("bare client, paced, %d at %g/s", cfg.Paced, cfg.PacedRate)
	fl := r.floor
	host := hostDelta(bu.before.host, bu.after.host, bu.after.at.Sub(bu.before.at))
	machine := host.machineLimit(n)
	return []row{
		{ceil, "ServiceAccount applies/s, concurrency 1", c.sa1, "applies/s"},
		{ceil, "ServiceAccount applies/s, concurrency " + conc, c.saN, "applies/s"},
		{ceil, "CalibanTask status applies/s, concurrency 1", c.status1, "applies/s"},
		{ceil, "CalibanTask status applies/s, concurrency " + conc, c.statusN, "applies/s"},
		{ceil, "write-bound task limit 1/(3/SA" + conc + " + 2/status" + conc + ")", c.taskLimit(), "tasks/s"},
		{burst, "creates sent in", bu.createsTook.Seconds(), "s"},
		{burst, "throughput, first create → last Running", bu.throughput(), "tasks/s"},
		{burst, "throughput / write-bound limit", 100 * bu.throughput() / c.taskLimit(), "%"},
		{burst, "machine-bound task limit: cores / CPU per task of all but the operator", machine, "tasks/s"},
		{burst, "throughput / machine-bound limit", 100 * bu.throughput() / machine, "%"},
		{burst, "machine busy (all cores)", host.busyPercent, "%"},
		{burst, "kube-apiserver CPU per task (the machine's speed)", ms(host.byProcess["kube-apiserver"]) / n, "ms"},
		{burst, "operator API requests per task (apiserver)", bu.apf.requests / n, "requests"},
		{burst, "operator API writes per task (apiserver)", bu.apf.writes / n, "writes"},
		{burst, "of which object writes, not Events", (bu.apf.writes - bu.apf.eventWrites) / n, "writes"},
		{burst, "operator API reads per task (apiserver)", bu.apf.reads / n, "reads"},
		{burst, "calibantask syncs per task", bu.opDelta("caliban_controller_syncs_total", map[string]string{"controller": "calibantask"}) / n, "syncs"},
		{burst, "operator CPU per task", ms(bu.after.cpu-bu.before.cpu) / n, "ms"},
		{burst, "operator RSS before the burst (VmRSS)", bu.idleRSS, "MiB"},
		{burst, "operator peak RSS (VmHWM)", bu.peakRSS, "MiB"},
		{burst, "create → Running p50", percentile(bu.createToRunning(), 50), "ms"},
		{burst, "create → Running p99", percentile(bu.createToRunning(), 99), "ms"},
		{burst, "create → Sandbox created p50 (operator)", percentile(bu.toSandbox, 50), "ms"},
		{burst, "create → Sandbox created p99 (operator)", percentile(bu.toSandbox, 99), "ms"},
		{burst, "Sandbox created → Ready p50 (kwok stand-in)", percentile(bu.sandboxToReady, 50), "ms"},
		{burst, "Sandbox created → Ready p99 (kwok stand-in)", percentile(bu.sandboxToReady, 99), "ms"},
		{burst, "Sandbox Ready → Running p50", percentile(bu.readyToRunning, 50), "ms"},
		{burst, "Sandbox Ready → Running p99", percentile(bu.readyToRunning, 99), "ms"},
		{paced, "create → Sandbox created p50 (operator)", percentile(pa.toSandbox, 50), "ms"},
		{paced, "create → Sandbox created p99 (operator)", percentile(pa.toSandbox, 99), "ms"},
		{paced, "Sandbox created → Ready p50 (kwok stand-in)", percentile(pa.sandboxToReady, 50), "ms"},
		{paced, "Sandbox created → Ready p99 (kwok stand-in)", percentile(pa.sandboxToReady, 99), "ms"},
		{paced, "Sandbox Ready → Running p50", percentile(pa.readyToRunning, 50), "ms"},
		{paced, "Sandbox Ready → Running p99", percentile(pa.readyToRunning, 99), "ms"},
		{paced, "create → Running p50", percentile(pa.createToRunning(), 50), "ms"},
		{paced, "create → Running p99", percentile(pa.createToRunning(), 99), "ms"},
		{steady, "window", st.window.Seconds(), "s"},
		{steady, "calibantask syncs in the window", st.syncs, "syncs"},
		{steady, "operator API writes in the window", st.apf.writes, "writes"},
		{steady, "of which Lease writes (leader election)", leaseWrites, "writes"},
		{steady, "operator API reads in the window", st.apf.reads, "reads"},
		{steady, "operator CPU in the window", ms(st.cpu), "ms"},
		{steady, "operator CPU per sync", ms(st.cpu) / max(st.syncs, 1), "ms"},
		{cold, "start → leader (lease acquired)", co.leading.Seconds(), "s"},
		{cold, "start → caches synced (/readyz 200 as leader)", co.synced.Seconds(), "s"},
		{cold, "machine busy until caches synced (all cores)", co.host.busyPercent, "%"},
		{cold, "kube-apiserver CPU until caches synced", co.host.byProcess["kube-apiserver"].Seconds(), "s"},
		{cold, "operator CPU until caches synced", co.host.byProcess[operatorKey].Seconds(), "s"},
		{cold, "start → first task sync", co.firstSync.Seconds(), "s"},
		{cold, "start → every task synced once", co.allSynced.Seconds(), "s"},
		{cold, "operator API requests until quiet", co.apf.requests, "requests"},
		{cold, "operator API writes until quiet", co.apf.writes, "writes"},
		{cold, "operator CPU until quiet", ms(co.cpu), "ms"},
		{floorStart, "start → caches synced", fl.synced.Seconds(), "s"},
		{floorStart, "machine busy until caches synced (all cores)", fl.host.busyPercent, "%"},
		{floorStart, "kube-apiserver CPU until caches synced", fl.host.byProcess["kube-apiserver"].Seconds(), "s"},
		{floorStart, "bare client CPU until caches synced", fl.host.byProcess[floorKey].Seconds(), "s"},
		{floor, "throughput, first create → last Running", fl.tasks.throughput(), "tasks/s"},
		{floor, "kube-apiserver CPU per task (the machine's speed)", ms(fl.burstHost.byProcess["kube-apiserver"]) / n, "ms"},
		{floor, "bare client API requests per task (apiserver)", fl.apf.requests / n, "requests"},
		{floor, "bare client CPU per task", ms(fl.burstHost.byProcess[floorKey]) / n, "ms"},
		{floor, "operator CPU per task / bare client CPU per task", (ms(bu.after.cpu-bu.before.cpu) / n) / (ms(fl.burstHost.byProcess[floorKey]) / n), "×"},
		{floor, "bare client RSS before the burst (VmRSS)", fl.idleRSS, "MiB"},
		{floor, "operator RSS before the burst / bare client's", bu.idleRSS / fl.idleRSS, "×"},
		{floor, "operator binary", r.operatorBinary, "MB"},
		{floor, "bare client binary", fl.binarySize, "MB"},
		{floor, "operator binary / bare client binary", r.operatorBinary / fl.binarySize, "×"},
		{floor, "Sandbox Ready → Running p50", percentile(fl.readyToRunning, 50), "ms"},
		{floor, "Sandbox Ready → Running p99", percentile(fl.readyToRunning, 99), "ms"},
		{floorPaced, "Sandbox Ready → Running p50", percentile(fl.pacedReadyToRunning, 50), "ms"},
		{floorPaced, "Sandbox Ready → Running p99", percentile(fl.pacedReadyToRunning, 99), "ms"},
	}
}

// format prints a number with about three significant digits.
func format(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func (r *Result) table() string {
	rows := r.rows
	switch {
	case r.Config.Warm:
		rows = r.warmRows
	case r.Config.RealAgentSandbox:
		rows = r.realRows
	}
	var sb strings.Builder
	sb.WriteString("| Phase | Measure | Value | Unit |\n|---|---|---:|---|\n")
	for _, row := range rows() {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", row.phase, row.measure, format(row.value), row.unit)
	}
	return sb.String()
}

// breakdown is the operator's requests by FlowSchema: per task during the
// burst, in total over the steady window and the cold start.
func (r *Result) breakdown(schemas []flowSchema) string {
	n := float64(r.Config.N)
	// A real run has no steady window or cold start: their columns would
	// read 0 as if measured.
	burstOnly := r.Config.RealAgentSandbox
	var sb strings.Builder
	if burstOnly {
		sb.WriteString("| Verb | Resource | Burst, per task |\n|---|---|---:|\n")
	} else {
		sb.WriteString("| Verb | Resource | Burst, per task | Steady window | Cold start |\n|---|---|---:|---:|---:|\n")
	}
	sorted := slices.Clone(schemas)
	slices.SortStableFunc(sorted, func(a, b flowSchema) int {
		return cmp.Compare(r.burst.apf.bySchema[b.name], r.burst.apf.bySchema[a.name])
	})
	for _, fs := range sorted {
		bu, st, co := r.burst.apf.bySchema[fs.name], r.steady.apf.bySchema[fs.name], r.cold.apf.bySchema[fs.name]
		if bu == 0 && st == 0 && co == 0 {
			continue
		}
		res := fs.resource
		if res == "" {
			res = "*"
		}
		if burstOnly {
			fmt.Fprintf(&sb, "| %s | %s | %s |\n", fs.verb, res, format(bu/n))
			continue
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", fs.verb, res, format(bu/n), format(st), format(co))
	}
	return sb.String()
}

// clientView is the burst as the operator's own client saw it.
func (r *Result) clientView() string {
	bu := r.burst
	n := float64(r.Config.N)
	var sb strings.Builder
	sb.WriteString("| Method | Code | Requests, per task |\n|---|---|---:|\n")
	reqs := bu.opDeltaBy("rest_client_requests_total", nil, "method", "code")
	for _, k := range sortedKeys(reqs) {
		method, code, _ := strings.Cut(k, " ")
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", method, code, format(reqs[k]/n))
	}
	sb.WriteString("\n| Where the time went | Total | Count | Mean |\n|---|---:|---:|---:|\n")
	timing := func(label, name string, labels map[string]string) {
		sum, count := bu.opDelta(name+"_sum", labels), bu.opDelta(name+"_count", labels)
		mean := 0.0
		if count > 0 {
			mean = 1000 * sum / count
		}
		fmt.Fprintf(&sb, "| %s | %s s | %s | %s ms |\n", label, format(sum), format(count), format(mean))
	}
	timing("calibantask sync", "caliban_controller_sync_duration_seconds", map[string]string{"controller": "calibantask"})
	timing("calibantask queue wait", "workqueue_queue_duration_seconds", map[string]string{"name": "calibantask"})
	timing("client-side rate limiter wait (QPS/burst)", "rest_client_rate_limiter_duration_seconds", nil)
	for _, verb := range slices.Sorted(func(yield func(string) bool) {
		for k := range bu.opDeltaBy("rest_client_request_duration_seconds_count", nil, "verb") {
			if !yield(k) {
				return
			}
		}
	}) {
		timing("API request, "+verb+", including the rate limiter wait", "rest_client_request_duration_seconds", map[string]string{"verb": verb})
	}
	fmt.Fprintf(&sb, "\nWorkqueue adds (calibantask): %s per task; sync errors: %s; retries: %s.\n",
		format(bu.opDelta("workqueue_adds_total", map[string]string{"name": "calibantask"})/n),
		format(bu.opDelta("caliban_controller_sync_errors_total", nil)),
		format(bu.opDelta("workqueue_retries_total", nil)))
	return sb.String()
}

// method explains every figure; it is part of the report so that a number
// is never read without its definition.
func (r *Result) method() string {
	cfg := r.Config
	return fmt.Sprintf(`- **Cluster**: a fresh kwokctl binary-runtime cluster of the test bed (test/framework), with the Sandbox stand-in's Stage set to no delay, so a Sandbox turns Ready as soon as kwok processes it. kwok plays one Stage at a time (one worker), which bounds how fast Sandboxes turn Ready: that is the test bed's, not the operator's.
- **Ceiling**: before any operator runs, an admin client with no client-side rate limit (rest.Config QPS -1) server-side-applies new ServiceAccounts, then the status of CalibanTasks (one task per worker, the message changing with every apply so each is a real write), for %s each at concurrency 1 and %d, after a short warm-up. The namespace is deleted, and gone, before the operator starts. Write-bound task limit = 1 / (3 / SA applies/s + 2 / status applies/s), both at concurrency %d: a task costs 3 child applies and 2 status applies.
- **Operator**: the binary of this commit, run as a process with its DEFAULT settings and only what the environment requires (KUBECONFIG with a TokenRequest token of the caliban-operator ServiceAccount bound by the RBAC of manifests/base, CALIBAN_LEASE_NAMESPACE=caliban-system with leader election on, metrics and pprof on free loopback ports). The burst, the paced phase and the cold start run at the default resync (300 s); only the steady-state operator sets CALIBAN_RESYNC_SECONDS=%d, so that a window of %s holds a resync.
- **Burst**: one Ready Workspace with an existing credentials Secret; %d CalibanTasks created by a client at concurrency %d, paced to spread over %s. Throughput = N / (last task seen Running − first create sent).
- **Requests and writes per task**: FlowSchemas whose subject is the operator's ServiceAccount (one per verb and resource its RBAC grants, then one catch-all for write verbs and one for read verbs and non-resource URLs) route its requests to a priority level of their own; the apiserver counts them in apiserver_flowcontrol_dispatched_requests_total by flow_schema. The difference between scrapes before the first create and after every task is Running and the operator has run no sync and sent no request but lease renewals for %s, divided by N. Writes are create, update, patch, delete, deletecollection; reads are get, list, watch.
- **Syncs per task**: caliban_controller_syncs_total{controller="calibantask"} from the operator's /metrics over the same interval, divided by N.
- **CPU and memory**: utime+stime of /proc/<pid>/stat (clock ticks of 10 ms) over the same interval, divided by N; peak RSS is VmHWM of /proc/<pid>/status after the burst. The RSS before the burst (VmRSS) is read the same way for the operator and the bare client, each after its caches synced over the same tasks; the binaries' sizes are of the files run (the operator's as make bench builds it, the bare client's as go build ./test/bench/floor does).
- **The machine's CPU**: /proc/stat (busy = all but idle and iowait) and every process's utime+stime grouped by command name, read at the same two moments as the burst's other figures (so the interval includes the quiet time the operator needs to be seen settled). The bench process itself (client, watches, scrapes) is "bench". Machine-bound task limit = the cores / (CPU per task of every process but the operator): what this machine could carry if the operator cost nothing. The write-bound limit is measured with small objects and no other watcher, so it overstates what a task's real writes (a Sandbox with a pod template, a status with the pin, each fanned out to every watcher) let the apiserver do; the machine-bound limit is the bound this run actually met.
- **Latencies**: one watch on CalibanTasks and one on Sandboxes, opened before the burst, record the first moment each task is seen Running and each Sandbox is seen Ready=True; create → Running starts when the create request is sent. Percentiles are nearest-rank. The paced phase creates %d more tasks at %g/s on the same operator.
- **Steady state**: once the steady-state operator has synced every task and been quiet (as above) for %s, the FlowSchema counters, its syncs and its CPU are taken over the window. Lease renewals (leader election) are writes too and are counted.
- **Cold start**: the burst's operator is stopped with SIGTERM and a fresh one (defaults) started over every task Running. Times are from the process start; caches synced = first /readyz 200 while it holds the lease (a standby answers 200 too), polled every 100 ms; first sync = its syncs_total above 0; every task synced = syncs_total reaching the number of tasks. Requests are counted from before the start until it is quiet.
- **Bare client**: last, with no operator running, a client built from test/bench/floor starts over the tasks the cold start saw (its informers list and watch what the operator's do; caches synced = it says so on its output, and the machine's CPU is read as for the cold start) and takes a second burst of %d tasks (another namespace, same Workspace spec, same pacing) to Running with the operator's identity, transport and codecs (protobuf for built-in kinds, the operator's JSON decoding for custom resources, no compression, no client-side limit) and the operator's builders. It watches the same four kinds and sends the same writes per task (the pin with Provisioning, ServiceAccount, NetworkPolicy, Sandbox, then Running and one Event), decodes no answer, and does nothing else: no queue, retries, admission, checks of children or leader election. Its CPU (/proc, from before the first create until %s after the last Running) per task is the floor of this machine for those requests and watch events; the ratio is the operator's CPU per task over it, from the same run. It sends a Running write the moment the watch event that makes it due arrives, waiting for no worker; after the burst, %d more tasks arrive at %g/s as in the operator's paced phase, and their Sandbox Ready → Running is the floor of that latency on this machine.
- **Profiles**: a CPU profile over the first %s of the burst, a heap profile after it, a CPU profile of the cold start (%s from the moment the endpoint answers) and a CPU profile of the steady-state window, from the operator's pprof endpoint (CALIBAN_PPROF_BIND_ADDRESS) when it serves one; and a CPU profile of the kube-apiserver over the cold start (its /debug/pprof, same length, from the moment the operator starts).
`, cfg.CeilingDuration, cfg.CeilingConcurrency, cfg.CeilingConcurrency, cfg.ResyncSeconds, cfg.SteadyWindow,
		cfg.N, cfg.CreateConcurrency, cfg.BurstSpread, quietFor, cfg.Paced, cfg.PacedRate, quietFor, cfg.N, quietFor, cfg.Paced, cfg.PacedRate, cfg.CPUProfile, cfg.ColdStartProfile)
}

// write renders the report and the plot into the results directory.
func (r *Result) write() error {
	r.Table = r.table()
	r.Plot = filepath.Join(r.Config.ResultsDir, r.Stem+".png")
	if err := r.plot(r.Plot); err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	real := r.Config.RealAgentSandbox
	var sb strings.Builder
	switch {
	case r.Config.Warm:
		fmt.Fprintf(&sb, "# caliban-operator benchmark: warm start, %d tasks from a warm pool, against agent-sandbox's own claims\n\nRun %s (BENCH_AGENT_SANDBOX=warm): %d bare SandboxClaims on a full pool, then a burst of %d tasks of a Workspace whose pool is full in two shapes (paced, then all at once on the refilled pool); no ceiling, paced, steady-state, cold-start or bare-client phase. agent-sandbox's controller runs with %s.\n\n", r.Config.N, r.Stamp.Format(time.RFC3339), r.Config.N, r.Config.N, agentSandboxFlags(r.Config.AgentSandboxArgs))
	case real:
		fmt.Fprintf(&sb, "# caliban-operator benchmark: %d tasks through agent-sandbox's controller\n\nRun %s. Only the burst was run (BENCH_AGENT_SANDBOX=real): no ceiling, paced, steady-state, cold-start or bare-client phase, and no profiles.\n\n", r.Config.N, r.Stamp.Format(time.RFC3339))
	default:
		fmt.Fprintf(&sb, "# caliban-operator benchmark: %d tasks\n\nRun %s.\n\n", r.Config.N, r.Stamp.Format(time.RFC3339))
	}
	sb.WriteString(r.Table)
	sb.WriteString("\n![Tasks Running over time during the burst; CDF of create → Running](" + filepath.Base(r.Plot) + ")\n")
	if real && r.real.stages.Skipped > 0 {
		fmt.Fprintf(&sb, "\n%d task(s) were left out of the stages; the first: %s.\n", r.real.stages.Skipped, r.real.stages.Problem)
	}
	if st := r.real.stages; real && st.NoClaimSplit > 0 {
		fmt.Fprintf(&sb, "\n%d task(s) count in the five stages but could not be split at their claim's binding; the first: %s.\n", st.NoClaimSplit, st.ClaimProblem)
	}
	if st := r.real.stages; real && st.NoSandboxSplit > 0 {
		fmt.Fprintf(&sb, "\n%d task(s) count in the five stages but could not be split at their Sandbox's Ready; the first: %s.\n", st.NoSandboxSplit, st.SandboxProblem)
	}
	sb.WriteString("\n## The operator's requests on the apiserver, by verb and resource\n\n")
	sb.WriteString(r.breakdown(r.schemas))
	sb.WriteString("\n## Where the machine's CPU went during the burst\n\n")
	wall := r.burst.after.at.Sub(r.burst.before.at)
	sb.WriteString(hostDelta(r.burst.before.host, r.burst.after.host, wall).table(float64(r.Config.N), "task", wall))
	if r.Config.Warm {
		sb.WriteString("\n## Every client's writes on the apiserver, until the last claim Ready and the last task Running\n\n")
		sb.WriteString(r.writesTable())
		sb.WriteString("\n## Where the machine's CPU went during agent-sandbox's bare claims\n\n")
		sb.WriteString(r.warm.bareHost.table(float64(r.Config.N), "claim", r.warm.bareWall))
	}
	sb.WriteString("\n## The burst as the operator's client saw it (its /metrics)\n\n")
	sb.WriteString(r.clientView())
	sb.WriteString("\n## Machine\n\n")
	for _, m := range r.Machine {
		sb.WriteString("- " + m + "\n")
	}
	sb.WriteString("\n## How each figure is measured\n\n")
	switch {
	case r.Config.Warm:
		sb.WriteString(r.warmMethod())
	case real:
		sb.WriteString(r.realMethod())
	default:
		sb.WriteString(r.method())
	}
	if len(r.Profiles) > 0 {
		sb.WriteString("\n## Profiles\n\n")
		for _, p := range r.Profiles {
			sb.WriteString("- " + filepath.Base(p) + "\n")
		}
	}
	r.Markdown = sb.String()
	r.Report = filepath.Join(r.Config.ResultsDir, r.Stem+".md")
	if err := os.WriteFile(r.Report, []byte(r.Markdown), 0o644); err != nil {
		return err
	}
	// latest.md is the same report under a fixed name; its image link
	// names the run's own plot. A real run has a latest of its own, so
	// that latest.md stays comparable from run to run.
	latest := "latest.md"
	switch {
	case r.Config.Warm:
		latest = "latest-warm.md"
	case real:
		latest = "latest-real.md"
	}
	r.Latest = filepath.Join(r.Config.ResultsDir, latest)
	return os.WriteFile(r.Latest, []byte(r.Markdown), 0o644)
}

// machine describes where the run happened.
func machine(ctx context.Context, root, operatorBinary string, kube kubernetes.Interface) []string {
	out := []string{fmt.Sprintf("nproc: %d", runtime.NumCPU())}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				out = append(out, "CPU: "+strings.TrimSpace(v))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				out = append(out, fmt.Sprintf("memory: %.1f GiB", kb/1024/1024))
			}
		}
	}
	out = append(out, "go: "+runtime.Version())
	commit := "unknown"
	if b, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(b))
		if st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			commit += " (with uncommitted changes)"
		}
	}
	out = append(out, "commit: "+commit)
	// BENCH_OPERATOR_BINARY may run another operator than this commit's:
	// the binary says what it was built from.
	out = append(out, "operator binary: "+binaryRevision(operatorBinary))
	// The test bed's binaries are built from source without version
	// stamps, so the apiserver reports v0.0.0; the pins say what it is.
	if data, err := os.ReadFile(filepath.Join(root, "hack", "tools", "go.mod")); err == nil {
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[0] == "k8s.io/kubernetes" || f[0] == "sigs.k8s.io/kwok") {
				out = append(out, "test bed: "+f[0]+" "+f[1])
			}
		}
	}
	if v, err := kube.Discovery().ServerVersion(); err == nil && !strings.HasPrefix(v.GitVersion, "v0.0.0") {
		out = append(out, "kube-apiserver: "+v.GitVersion)
	}
	return out
}

// binaryRevision says what a Go binary was built from: the VCS revision
// the toolchain stamped, else the version make stamped into main (git
// describe, "-dirty" with uncommitted changes), else "unknown".
func binaryRevision(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	rev, modified, stamped := "", false, ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "-ldflags":
			for f := range strings.FieldsSeq(s.Value) {
				if v, ok := strings.CutPrefix(strings.Trim(f, `"'`), "main.version="); ok {
					stamped = v
				}
			}
		}
	}
	switch {
	case rev != "":
		if len(rev) > 7 {
			rev = rev[:7]
		}
		if modified {
			rev += " (with uncommitted changes)"
		}
		return rev
	case stamped != "":
		return stamped + " (the version make stamped)"
	}
	return "unknown (built without VCS or version stamps)"
}

// agentSandboxFlags says which flags agent-sandbox's controller ran with
// beyond the test bed's own.
func agentSandboxFlags(args []string) string {
	if len(args) == 0 {
		return "its defaults (BENCH_AGENT_SANDBOX_ARGS empty)"
	}
	return "`" + strings.Join(args, " ") + "` (BENCH_AGENT_SANDBOX_ARGS) beside its defaults"
}
