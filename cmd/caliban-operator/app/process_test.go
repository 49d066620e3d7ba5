// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

const (
	leaseNamespace = "caliban-system"
	leaseName      = "caliban-operator"
	// patience bounds every wait for something the process does. It only
	// turns a hang into a failure; nothing asserts how fast anything is.
	patience = 15 * time.Second
)

// electionSettings are short lease timings: a 3 s lease, renewed every
// 0.5 s, lost after 2 s without a renewal. The 2 s leave a loaded machine
// room before a renewal misses by accident.
func electionSettings(identity string) config.ProcessSettings {
	s := config.DefaultProcessSettings()
	s.LeaseNamespace = leaseNamespace
	s.LeaseName = leaseName
	s.LeaseDuration = 3 * time.Second
	s.LeaseGrace = time.Second
	s.PodName = identity
	s.MetricsBindAddress = ""
	return s
}

// writers counts the fake controllers' Runs under way across replicas: the
// lifecycle exists so that there is never more than one.
type writers struct {
	now        atomic.Int32
	overlapped atomic.Bool
}

func (w *writers) enter() {
	if w.now.Add(1) > 1 {
		w.overlapped.Store(true)
	}
}

func (w *writers) leave() { w.now.Add(-1) }

// fakeControllers stand for one replica's controllers. Run blocks until its
// ctx ends, as the real ones do, then spends its shutdown grace in
// shutdownGrace, and reports each term's start and end on the channels.
type fakeControllers struct {
	writers *writers
	// failFirst, when set, is what the first term's Run returns at once,
	// without being told to stop.
	failFirst     error
	shutdownGrace func(term int)
	running       atomic.Bool

	started, stopped chan int
	mu               sync.Mutex
	terms            int
}

func newFakeControllers(w *writers) *fakeControllers {
	return &fakeControllers{writers: w, started: make(chan int, 16), stopped: make(chan int, 16)}
}

func (f *fakeControllers) Run(ctx context.Context) error {
	f.writers.enter()
	f.mu.Lock()
	term := f.terms
	f.terms++
	f.mu.Unlock()
	f.started <- term
	defer func() {
		f.running.Store(false)
		f.writers.leave()
		f.stopped <- term
	}()
	if term == 0 && f.failFirst != nil {
		return f.failFirst
	}
	<-ctx.Done()
	if f.shutdownGrace != nil {
		f.shutdownGrace(term)
	}
	return nil
}

func (f *fakeControllers) Running() bool { return f.running.Load() }

func (f *fakeControllers) termCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terms
}

// leaseAPI is a fake clientset whose Leases behave as the API server's do
// where leader election depends on it: an update based on a stale read
// fails with a conflict (the fake's object tracker alone lets the last
// writer win, so a leader would never notice another holder). It can also
// refuse every Lease update, or only those that name a holder (renewals,
// not releases).
type leaseAPI struct {
	client         *fake.Clientset
	refuse         atomic.Bool
	refuseRenewals atomic.Bool
	mu             sync.Mutex
}

func newLeaseAPI() *leaseAPI {
	a := &leaseAPI{client: fake.NewClientset()}
	a.client.PrependReactor("*", "leases", a.react)
	return a
}

func (a *leaseAPI) react(action k8stesting.Action) (bool, runtime.Object, error) {
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	switch action.GetVerb() {
	case "create":
		lease := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		a.mu.Lock()
		defer a.mu.Unlock()
		lease.ResourceVersion = "1"
		return true, lease, a.client.Tracker().Create(gvr, lease, action.GetNamespace())
	case "update":
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		if a.refuse.Load() || a.refuseRenewals.Load() && ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
			return true, nil, apierrors.NewServiceUnavailable("the test refuses this Lease update")
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		current, err := a.client.Tracker().Get(gvr, action.GetNamespace(), lease.Name)
		if err != nil {
			return true, nil, err
		}
		rv := current.(*coordinationv1.Lease).ResourceVersion
		if lease.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), lease.Name, errors.New("stale resourceVersion"))
		}
		n, err := strconv.Atoi(rv)
		if err != nil {
			return true, nil, err
		}
		lease.ResourceVersion = strconv.Itoa(n + 1)
		return true, lease, a.client.Tracker().Update(gvr, lease, action.GetNamespace())
	}
	return false, nil, nil
}

// holder is the Lease's holderIdentity, "" when released or absent.
func (a *leaseAPI) holder() (string, error) {
	lease, err := a.client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

func (a *leaseAPI) mustHolder(t *testing.T) string {
	t.Helper()
	h, err := a.holder()
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return h
}

// intrude makes identity hold the Lease, rewriting it every 100 ms as
// someone who took it over would, until the returned func is called; its
// lease then expires a second after its last write.
func (a *leaseAPI) intrude(t *testing.T, identity string) (goAway func()) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			leases := a.client.CoordinationV1().Leases(leaseNamespace)
			if lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{}); err == nil {
				now := metav1.NewMicroTime(time.Now())
				lease.Spec.HolderIdentity = ptr.To(identity)
				lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
				lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
				// A conflict with the leader's renewal is retried next tick.
				_, _ = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	goAway = func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(goAway)
	return goAway
}

// start runs p.Run in the background; the test ends only after it returned.
func start(t *testing.T, p *Process) (cancel context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch, returned := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(returned)
		ch <- p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-returned:
		case <-time.After(patience):
			t.Errorf("Process.Run did not return within %v of its ctx ending", patience)
		}
	})
	return cancel, ch
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("gave up after %v waiting for %s", patience, what)
		panic("unreachable")
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", patience, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readyz(p *Process) int {
	rec := httptest.NewRecorder()
	p.Handler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code
}

func TestLeaderRunsOneTermUntilShutdownAndReleasesTheLeaseOnlyAfterTheShutdownGrace(t *testing.T) {
	t.Parallel()
	api := newLeaseAPI()
	w := &writers{}
	f := newFakeControllers(w)
	s := electionSettings("replica-a")
	var holderInGrace string
	var graceErr error
	f.shutdownGrace = func(int) {
		// Long enough for a release racing the shutdown grace to have landed.
		time.Sleep(2 * s.RetryPeriod())
		holderInGrace, graceErr = api.holder()
	}
	p := &Process{Settings: s, Leases: api.client.CoordinationV1(), Controllers: f}
	cancel, done := start(t, p)

	waitFor(t, f.started, "the first term")
	if got := api.mustHolder(t); got != "replica-a" {
		t.Fatalf("leading, but the Lease names %q", got)
	}
	if got := readyz(p); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while leading before the caches synced = %d, want 503", got)
	}
	f.running.Store(true)
	if got := readyz(p); got != http.StatusOK {
		t.Errorf("/readyz while leading with the controllers running = %d, want 200", got)
	}

	cancel()
	err := waitFor(t, done, "Process.Run to return after the signal")
	if graceErr != nil {
		t.Fatalf("reading the Lease during the shutdown grace: %v", graceErr)
	}
	type outcome struct {
		Err             error
		Terms           int
		HolderInGrace   string
		HolderAfterExit string
	}
	got := outcome{err, f.termCount(), holderInGrace, api.mustHolder(t)}
	want := outcome{nil, 1, "replica-a", ""}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("shutdown while leading (-want +got):\n%s", diff)
	}
}

func TestLosingTheLeaseEndsTheTermAndTheProcessCampaignsAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// lose makes this replica lose the lease; comeBack lets it win
		// the lease again.
		lose func(t *testing.T, api *leaseAPI) (comeBack func())
	}{
		{
			name: "another holder takes the lease over, then goes away",
			lose: func(t *testing.T, api *leaseAPI) func() { return api.intrude(t, "intruder") },
		},
		{
			name: "the API refuses to renew the lease, then accepts again",
			lose: func(t *testing.T, api *leaseAPI) func() {
				api.refuse.Store(true)
				return func() { api.refuse.Store(false) }
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newLeaseAPI()
			w := &writers{}
			f := newFakeControllers(w)
			p := &Process{Settings: electionSettings("replica-a"), Leases: api.client.CoordinationV1(), Controllers: f}
			cancel, done := start(t, p)

			waitFor(t, f.started, "the first term")
			if got := readyz(p); got != http.StatusServiceUnavailable {
				t.Errorf("/readyz while leading before the caches synced = %d, want 503", got)
			}
			comeBack := tc.lose(t, api)
			waitFor(t, f.stopped, "the first term to stop after the lease was lost")
			eventually(t, "/readyz to answer 200 in standby", func() bool { return readyz(p) == http.StatusOK })
			select {
			case err := <-done:
				t.Fatalf("Process.Run returned (%v) after losing the lease; it must stand by and campaign again", err)
			default:
			}

			comeBack()
			term := waitFor(t, f.started, "a second term once the lease can be won again")
			holder := api.mustHolder(t)
			cancel()
			err := waitFor(t, done, "Process.Run to return after the signal")

			type outcome struct {
				SecondTerm      int
				HolderInTerm2   string
				Err             error
				Terms           int
				Overlapped      bool
				HolderAfterExit string
			}
			got := outcome{term, holder, err, f.termCount(), w.overlapped.Load(), api.mustHolder(t)}
			want := outcome{1, "replica-a", nil, 2, false, ""}
			if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A leader that could not renew may still reach the API when its
// controllers' shutdown grace begins; it must neither release the lease nor
// win it again before they have stopped.
func TestALostLeaseIsNeitherReleasedNorWonAgainDuringTheShutdownGrace(t *testing.T) {
	t.Parallel()
	api := newLeaseAPI()
	w := &writers{}
	f := newFakeControllers(w)
	s := electionSettings("replica-a")
	var holderInGrace string
	var graceErr error
	f.shutdownGrace = func(term int) {
		if term != 0 {
			return
		}
		holderInGrace, graceErr = api.holder()
		api.refuseRenewals.Store(false)
		// Long enough for a campaign racing the shutdown grace to have won.
		time.Sleep(4 * s.RetryPeriod())
	}
	p := &Process{Settings: s, Leases: api.client.CoordinationV1(), Controllers: f}
	cancel, done := start(t, p)

	waitFor(t, f.started, "the first term")
	api.refuseRenewals.Store(true)
	waitFor(t, f.stopped, "the first term to stop after renewals failed")
	term := waitFor(t, f.started, "a second term once renewals succeed again")
	cancel()
	err := waitFor(t, done, "Process.Run to return after the signal")
	if graceErr != nil {
		t.Fatalf("reading the Lease during the shutdown grace: %v", graceErr)
	}

	type outcome struct {
		HolderInGrace   string
		SecondTerm      int
		Overlapped      bool
		Err             error
		HolderAfterExit string
	}
	got := outcome{holderInGrace, term, w.overlapped.Load(), err, api.mustHolder(t)}
	want := outcome{"replica-a", 1, false, nil, ""}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStandbyTakesOverOnlyAfterTheLeadersShutdownGrace(t *testing.T) {
	t.Parallel()
	api := newLeaseAPI()
	w := &writers{}
	leader, standby := newFakeControllers(w), newFakeControllers(w)
	sa := electionSettings("replica-a")
	var holderInGrace string
	var graceErr error
	leader.shutdownGrace = func(int) {
		time.Sleep(2 * sa.RetryPeriod())
		holderInGrace, graceErr = api.holder()
	}
	a := &Process{Settings: sa, Leases: api.client.CoordinationV1(), Controllers: leader}
	cancelA, doneA := start(t, a)
	waitFor(t, leader.started, "replica-a to lead")
	b := &Process{Settings: electionSettings("replica-b"), Leases: api.client.CoordinationV1(), Controllers: standby}
	cancelB, doneB := start(t, b)
	if got := readyz(b); got != http.StatusOK {
		t.Errorf("/readyz of the standby = %d, want 200", got)
	}

	cancelA()
	errA := waitFor(t, doneA, "replica-a to return after the signal")
	waitFor(t, standby.started, "replica-b to take over")
	holderAfterHandover := api.mustHolder(t)
	cancelB()
	errB := waitFor(t, doneB, "replica-b to return after the signal")
	if graceErr != nil {
		t.Fatalf("reading the Lease during the shutdown grace: %v", graceErr)
	}

	type outcome struct {
		ErrA, ErrB          error
		HolderInGrace       string
		HolderAfterHandover string
		Overlapped          bool
		TermsA, TermsB      int
	}
	got := outcome{errA, errB, holderInGrace, holderAfterHandover, w.overlapped.Load(), leader.termCount(), standby.termCount()}
	want := outcome{nil, nil, "replica-a", "replica-b", false, 1, 1}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestShutdownWhileStandingByLeavesTheHoldersLeaseAlone(t *testing.T) {
	t.Parallel()
	api := newLeaseAPI()
	now := metav1.NewMicroTime(time.Now())
	_, err := api.client.CoordinationV1().Leases(leaseNamespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: leaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("replica-z"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeControllers(&writers{})
	p := &Process{Settings: electionSettings("replica-a"), Leases: api.client.CoordinationV1(), Controllers: f}
	cancel, done := start(t, p)
	eventually(t, "replica-a to read the Lease", func() bool {
		for _, a := range api.client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
				return true
			}
		}
		return false
	})
	cancel()
	err = waitFor(t, done, "Process.Run to return after the signal")

	type outcome struct {
		Err    error
		Terms  int
		Holder string
	}
	got := outcome{err, f.termCount(), api.mustHolder(t)}
	want := outcome{nil, 0, "replica-z"}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWithoutLeaderElectionTheControllersRunOnceUntilShutdown(t *testing.T) {
	t.Parallel()
	api := newLeaseAPI()
	s := electionSettings("replica-a")
	s.LeaderElection = false
	f := newFakeControllers(&writers{})
	p := &Process{Settings: s, Leases: api.client.CoordinationV1(), Controllers: f}
	cancel, done := start(t, p)

	waitFor(t, f.started, "the controllers to start")
	if got := readyz(p); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the caches synced = %d, want 503", got)
	}
	f.running.Store(true)
	if got := readyz(p); got != http.StatusOK {
		t.Errorf("/readyz with the controllers running = %d, want 200", got)
	}
	cancel()
	err := waitFor(t, done, "Process.Run to return after the signal")

	type outcome struct {
		Err           error
		Terms         int
		LeaseAPICalls int
	}
	got := outcome{err, f.termCount(), len(api.client.Actions())}
	want := outcome{nil, 1, 0}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestControllersStoppingOnTheirOwnEndTheProcess(t *testing.T) {
	t.Parallel()
	for _, election := range []bool{true, false} {
		t.Run("leader election "+strconv.FormatBool(election), func(t *testing.T) {
			t.Parallel()
			api := newLeaseAPI()
			s := electionSettings("replica-a")
			s.LeaderElection = election
			f := newFakeControllers(&writers{})
			cachesNeverSynced := errors.New("caches did not sync")
			f.failFirst = cachesNeverSynced
			p := &Process{Settings: s, Leases: api.client.CoordinationV1(), Controllers: f}
			_, done := start(t, p)
			err := waitFor(t, done, "Process.Run to return once the controllers stopped")

			type outcome struct {
				Err    error
				Terms  int
				Holder string
			}
			got := outcome{err, f.termCount(), api.mustHolder(t)}
			// The lease is released so that a standby takes over now.
			want := outcome{cachesNeverSynced, 1, ""}
			if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err != nil && !strings.Contains(err.Error(), "stopped on their own") {
				t.Errorf("error %q does not say the controllers stopped on their own", err)
			}
		})
	}
}

// erringLock answers every lease request with err.
type erringLock struct {
	resourcelock.Interface
	err error
}

func (l erringLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{}, nil, l.err
}

func (l erringLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }

func (l erringLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }

func TestOnlyAnswersFromStorageCountAsTheApiserverAnswering(t *testing.T) {
	t.Parallel()
	lease := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "a lease read counts", want: true},
		{name: "a missing lease counts", err: apierrors.NewNotFound(lease, "caliban-operator"), want: true},
		{name: "a conflict counts", err: apierrors.NewConflict(lease, "caliban-operator", errors.New("changed")), want: true},
		{name: "an existing lease counts", err: apierrors.NewAlreadyExists(lease, "caliban-operator"), want: true},
		{name: "an apiserver whose etcd times out does not count", err: apierrors.NewTimeoutError("etcd", 1)},
		{name: "an internal error does not count", err: apierrors.NewInternalError(errors.New("etcdserver: no leader"))},
		{name: "a refused connection does not count", err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}},
	}
	for _, tc := range tests {
		for _, call := range []string{"Get", "Create", "Update"} {
			t.Run(tc.name+" ("+call+")", func(t *testing.T) {
				t.Parallel()
				var answered atomic.Int64
				l := answerRecorder{Interface: erringLock{err: tc.err}, answered: &answered}
				switch call {
				case "Get":
					_, _, _ = l.Get(context.Background())
				case "Create":
					_ = l.Create(context.Background(), resourcelock.LeaderElectionRecord{})
				case "Update":
					_ = l.Update(context.Background(), resourcelock.LeaderElectionRecord{})
				}
				if got := answered.Load() != 0; got != tc.want {
					t.Errorf("%s returning %v noted an answer: %t, want %t", call, tc.err, got, tc.want)
				}
			})
		}
	}
}
