// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// shapeResult is one shape of the operator's warm burst: the paced one
// (N creates over BurstSpread) or all at once (N creates, CreateConcurrency
// in flight, no pacing), each on a full pool.
type shapeResult struct {
	// label names the shape in the report.
	label string
	// toRunning is each task's create sent → Running seen.
	toRunning []time.Duration
	// dupsAtEnd counts tasks whose claim controls two or more Sandboxes
	// once every task is Running; dupsPeak is the most such tasks at any
	// one moment of the shape, dupsMostOfOne the most Sandboxes one claim
	// controlled at once, both on a watch on Sandboxes.
	dupsAtEnd, dupsPeak, dupsMostOfOne int
	// noClaim counts tasks whose claim was not found at the end.
	noClaim int
	// runningToSelected is, per task whose pod was selected, max(0,
	// selected − Running): selected is the first moment a pod carried
	// agents.x-k8s.io/claim-uid=<its claim's UID> with Ready=True, the
	// moment the task's NetworkPolicy applies to a running pod.
	runningToSelected []time.Duration
	// runningFirst counts tasks seen Running before their pod was
	// selected; unselected tasks never selected by the end.
	runningFirst, unselected int
	// runningBeforeSelectedRV counts tasks whose first Running status has
	// a lower resourceVersion than the pod update that made the pod
	// selected: the apiserver's own order of the two writes, free of the
	// two watches' delivery times (one etcd, whose revisions order every
	// write).
	runningBeforeSelectedRV int
}

// sandboxOwners tracks, from a watch on Sandboxes, which claim UID
// controls each Sandbox, and the most duplicates seen at once.
type sandboxOwners struct {
	mu sync.Mutex
	// owner is each Sandbox's controlling SandboxClaim's UID, for the
	// Sandboxes a claim controls.
	owner map[string]types.UID
	// count is how many Sandboxes each claim UID controls.
	count map[types.UID]int
	// dups is how many claims control two or more Sandboxes now; peak
	// its largest value, mostOfOne the largest count.
	dups, peak, mostOfOne int
}

func newSandboxOwners() *sandboxOwners {
	return &sandboxOwners{owner: map[string]types.UID{}, count: map[types.UID]int{}}
}

// claimController is the UID of the SandboxClaim that controls obj, if
// one does.
func claimController(obj metav1.Object) (types.UID, bool) {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "SandboxClaim" {
		return ref.UID, true
	}
	return "", false
}

// observe applies one watch event on the Sandbox named name: deleted, or
// now controlled by claim (ok false: by no claim).
func (s *sandboxOwners) observe(name string, deleted bool, claim types.UID, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, had := s.owner[name]; had {
		if s.count[old] == 2 {
			s.dups--
		}
		s.count[old]--
		if s.count[old] == 0 {
			delete(s.count, old)
		}
		delete(s.owner, name)
	}
	if deleted || !ok {
		return
	}
	s.owner[name] = claim
	s.count[claim]++
	if s.count[claim] == 2 {
		s.dups++
	}
	s.peak = max(s.peak, s.dups)
	s.mostOfOne = max(s.mostOfOne, s.count[claim])
}

func (s *sandboxOwners) peaks() (dups, mostOfOne int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.mostOfOne
}

// sandboxesPerClaim counts, in a list of Sandboxes, how many each claim
// UID controls.
func sandboxesPerClaim(sandboxes []unstructured.Unstructured) map[types.UID]int {
	out := map[types.UID]int{}
	for i := range sandboxes {
		if uid, ok := claimController(&sandboxes[i]); ok {
			out[uid]++
		}
	}
	return out
}

// tasksWithDuplicates is how many of the claim UIDs (one per task) control
// two or more Sandboxes by counts.
func tasksWithDuplicates(claimUIDs []types.UID, counts map[types.UID]int) int {
	n := 0
	for _, uid := range claimUIDs {
		if uid != "" && counts[uid] >= 2 {
			n++
		}
	}
	return n
}

// podSelection records, from a watch on pods, when a pod was first seen
// with agents.x-k8s.io/claim-uid=<uid> and Ready=True, per claim UID.
type podSelection struct {
	mu       sync.Mutex
	selected map[types.UID]time.Time
	// rv is the resourceVersion of the pod at selection.
	rv map[types.UID]uint64
}

func (p *podSelection) observe(pod *corev1.Pod, now time.Time) {
	uid := types.UID(pod.Labels[builders.LabelClaimUID])
	if uid == "" || !podReady(pod) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.selected[uid]; !seen {
		p.selected[uid] = now
		if p.rv == nil {
			p.rv = map[types.UID]uint64{}
		}
		p.rv[uid], _ = strconv.ParseUint(pod.ResourceVersion, 10, 64)
	}
}

func (p *podSelection) rvAt(uid types.UID) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rv[uid]
}

// taskRunning records, from a watch on CalibanTasks, the resourceVersion
// of each task's first status with phase Running.
type taskRunning struct {
	mu sync.Mutex
	rv map[string]uint64
}

func (r *taskRunning) observe(task *calibanv1alpha1.CalibanTask) {
	if task.Status.Phase != calibanv1alpha1.TaskRunning {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.rv[task.Name]; !seen {
		r.rv[task.Name], _ = strconv.ParseUint(task.ResourceVersion, 10, 64)
	}
}

func (r *taskRunning) at(name string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rv[name]
}

// runningBeforeSelected counts the tasks whose Running write (running[i])
// comes before the write that made their pod selected (selected[i]) in
// the apiserver's order; a task missing either is left out.
func runningBeforeSelected(running, selected []uint64) int {
	n := 0
	for i := range running {
		if running[i] != 0 && selected[i] != 0 && running[i] < selected[i] {
			n++
		}
	}
	return n
}

func (p *podSelection) at(uid types.UID) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.selected[uid]
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runningToSelected is, for each task with running[i] and selected[i] (a
// zero selected: never selected), max(0, selected − running); how many
// tasks were Running strictly before their pod was selected; and how many
// were never selected. A task never seen Running is left out.
func runningToSelected(running, selected []time.Time) (lags []time.Duration, runningFirst, unselected int) {
	for i := range running {
		if running[i].IsZero() {
			continue
		}
		if selected[i].IsZero() {
			unselected++
			continue
		}
		lag := selected[i].Sub(running[i])
		if lag > 0 {
			runningFirst++
		}
		lags = append(lags, max(0, lag))
	}
	return lags, runningFirst, unselected
}

// shapeWatch watches a shape's Sandboxes and pods from before its first
// create to its end.
type shapeWatch struct {
	owners  *sandboxOwners
	pods    *podSelection
	running *taskRunning
	stop    func()
}

// watchShape starts watches on the Sandboxes and the pods of ns, each
// seeded with what its list returns.
func (b *bench) watchShape(ctx context.Context, ns string) (*shapeWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	sw := &shapeWatch{owners: newSandboxOwners(), pods: &podSelection{selected: map[types.UID]time.Time{}, rv: map[types.UID]uint64{}},
		running: &taskRunning{rv: map[string]uint64{}}, stop: cancel}

	tasks := b.caliban.CalibanV1alpha1().CalibanTasks(ns)
	tlist, err := tasks.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range tlist.Items {
		sw.running.observe(&tlist.Items[i])
	}
	if err := retryWatch(ctx, tlist.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return tasks.Watch(ctx, opts)
	}, func(ev watch.Event, _ time.Time) {
		if task, ok := ev.Object.(*calibanv1alpha1.CalibanTask); ok && ev.Type != watch.Deleted {
			sw.running.observe(task)
		}
	}); err != nil {
		cancel()
		return nil, err
	}

	sandboxes := b.dynamic.Resource(sandboxGVR).Namespace(ns)
	slist, err := sandboxes.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range slist.Items {
		uid, ok := claimController(&slist.Items[i])
		sw.owners.observe(slist.Items[i].GetName(), false, uid, ok)
	}
	onSandbox := func(ev watch.Event, _ time.Time) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return
		}
		uid, owned := claimController(u)
		sw.owners.observe(u.GetName(), ev.Type == watch.Deleted, uid, owned)
	}
	if err := retryWatch(ctx, slist.GetResourceVersion(), func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return sandboxes.Watch(ctx, opts)
	}, onSandbox); err != nil {
		cancel()
		return nil, err
	}

	pods := b.admin.CoreV1().Pods(ns)
	plist, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	now := time.Now()
	for i := range plist.Items {
		sw.pods.observe(&plist.Items[i], now)
	}
	onPod := func(ev watch.Event, now time.Time) {
		if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			sw.pods.observe(pod, now)
		}
	}
	if err := retryWatch(ctx, plist.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return pods.Watch(ctx, opts)
	}, onPod); err != nil {
		cancel()
		return nil, err
	}
	return sw, nil
}

// retryWatch watches from rv until ctx ends, calling on for each event
// with the moment it arrived.
func retryWatch(ctx context.Context, rv string, w func(context.Context, metav1.ListOptions) (watch.Interface, error), on func(watch.Event, time.Time)) error {
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		rw.Stop()
	}()
	go func() {
		for ev := range rw.ResultChan() {
			if _, ok := ev.Object.(runtime.Object); ok {
				on(ev, time.Now())
			}
		}
	}()
	return nil
}

// finish reads the shape's figures once its tasks are all Running: the
// claims and Sandboxes as listed now, and what the watches saw.
func (sw *shapeWatch) finish(ctx context.Context, b *bench, ns, label string, names []string, sent, running []time.Time) (shapeResult, error) {
	defer sw.stop()
	r := shapeResult{label: label}
	for i := range names {
		r.toRunning = append(r.toRunning, running[i].Sub(sent[i]))
	}
	claims, err := b.caliban.ExtensionsV1beta1().SandboxClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	uidOf := map[string]types.UID{}
	for _, c := range claims.Items {
		uidOf[c.Name] = c.UID
	}
	sandboxes, err := b.dynamic.Resource(sandboxGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	uids := make([]types.UID, len(names))
	selected := make([]time.Time, len(names))
	runningRV, selectedRV := make([]uint64, len(names)), make([]uint64, len(names))
	for i, n := range names {
		runningRV[i] = sw.running.at(n)
		uids[i] = uidOf[builders.ClaimName(n)]
		if uids[i] == "" {
			r.noClaim++
			continue
		}
		selected[i] = sw.pods.at(uids[i])
		selectedRV[i] = sw.pods.rvAt(uids[i])
	}
	r.runningBeforeSelectedRV = runningBeforeSelected(runningRV, selectedRV)
	r.dupsAtEnd = tasksWithDuplicates(uids, sandboxesPerClaim(sandboxes.Items))
	r.dupsPeak, r.dupsMostOfOne = sw.owners.peaks()
	r.runningToSelected, r.runningFirst, r.unselected = runningToSelected(running, selected)
	b.logf("  %s: %d task(s) with two or more Sandboxes at the end (%d at most at once), %d Running before selected, %d never selected",
		label, r.dupsAtEnd, r.dupsPeak, r.runningFirst, r.unselected)
	return r, nil
}

// resetWarmNamespace deletes the paced shape's tasks, waits until
// their claims and the Sandboxes claims control are gone, and the pool is
// full again: the second shape starts on the same full pool of N as the
// first, in the same namespace, with the same operator.
func (b *bench) resetWarmNamespace(ctx context.Context, names []string) error {
	tasks := b.caliban.CalibanV1alpha1().CalibanTasks(benchNamespace)
	background := metav1.DeletePropagationBackground
	for _, n := range names {
		if err := tasks.Delete(ctx, n, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			return fmt.Errorf("deleting CalibanTask %s: %w", n, err)
		}
	}
	ext := b.caliban.ExtensionsV1beta1()
	if err := b.poll(ctx, b.cfg.RunningTimeout, func() (bool, string, error) {
		t, err := tasks.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		c, err := ext.SandboxClaims(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		sbs, err := b.dynamic.Resource(sandboxGVR).Namespace(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		claimed := 0
		for _, n := range sandboxesPerClaim(sbs.Items) {
			claimed += n
		}
		pools, err := ext.SandboxWarmPools(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		ready := int32(0)
		for _, p := range pools.Items {
			ready += p.Status.ReadyReplicas
		}
		return len(t.Items) == 0 && len(c.Items) == 0 && claimed == 0 && ready >= int32(b.cfg.N),
			fmt.Sprintf("%d tasks, %d claims, %d claimed Sandboxes left; pool %d/%d ready", len(t.Items), len(c.Items), claimed, ready, b.cfg.N), nil
	}); err != nil {
		return fmt.Errorf("clearing the paced shape: %w", err)
	}
	return b.waitFullPool(ctx)
}

// allAtOnce creates N tasks with no pacing, CreateConcurrency at a time,
// as a client that restarts and sends its backlog would, and waits until
// they are Running.
func (b *bench) allAtOnce(ctx context.Context, obs *observer) (shapeResult, error) {
	cfg := b.cfg
	sw, err := b.watchShape(ctx, benchNamespace)
	if err != nil {
		return shapeResult{}, err
	}
	names := taskNames("a", cfg.N)
	sent, err := b.createTasks(ctx, benchNamespace, names, math.Inf(1), cfg.CreateConcurrency)
	if err != nil {
		sw.stop()
		return shapeResult{}, err
	}
	b.logf("  %d creates sent in %s", cfg.N, time.Since(sent[0]).Round(time.Millisecond))
	if err := obs.waitRunning(ctx, b, names, cfg.RunningTimeout); err != nil {
		sw.stop()
		return shapeResult{}, err
	}
	return sw.finish(ctx, b, benchNamespace, allAtOnceLabel(cfg.N, cfg.CreateConcurrency), names, sent, obs.runningAt(names))
}

func pacedLabel(n int, spread time.Duration) string {
	return fmt.Sprintf("warm shape paced: %d tasks over %s", n, spread)
}

func allAtOnceLabel(n, conc int) string {
	return fmt.Sprintf("warm shape all at once: %d tasks, %d creates in flight, no pacing", n, conc)
}

// rows are the rows of one shape.
func (s shapeResult) rows() []row {
	l := s.label
	return []row{
		{l, "create → Running p50 (watch)", percentile(s.toRunning, 50) / 1000, "s"},
		{l, "create → Running p99 (watch)", percentile(s.toRunning, 99) / 1000, "s"},
		{l, "tasks with two or more Sandboxes (claim-controlled), at the end", float64(s.dupsAtEnd), "tasks"},
		{l, "tasks with two or more Sandboxes, most at once during the shape (watch)", float64(s.dupsPeak), "tasks"},
		{l, "most Sandboxes one claim controlled at once (watch)", float64(s.dupsMostOfOne), "Sandboxes"},
		{l, "tasks whose claim was not found at the end", float64(s.noClaim), "tasks"},
		{l, "Running → pod selected (claim-uid label, Ready) p50 (watch)", percentile(s.runningToSelected, 50) / 1000, "s"},
		{l, "Running → pod selected p99 (watch)", percentile(s.runningToSelected, 99) / 1000, "s"},
		{l, "Running → pod selected max (watch)", percentile(s.runningToSelected, 100) / 1000, "s"},
		{l, "tasks Running before their pod was selected (watch arrival times)", float64(s.runningFirst), "tasks"},
		{l, "tasks Running before their pod was selected, in the apiserver's order (resourceVersions)", float64(s.runningBeforeSelectedRV), "tasks"},
		{l, "tasks whose pod was never selected by the end (misses)", float64(s.unselected), "tasks"},
	}
}
