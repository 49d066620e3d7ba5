// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// Controllers are what one leadership term runs. *operator.Operator is the
// real one; tests pass a fake so that the term loop runs without a cluster.
type Controllers interface {
	// Run runs the controllers until ctx ends and returns once their syncs
	// in flight have finished or their shutdown grace has run out.
	Run(ctx context.Context) error
	// Running reports whether the controllers run with synced caches.
	Running() bool
}

// Process runs the controllers of one operator process and reports their
// state to /readyz (see Handler). Without leader election it runs them once;
// with it, one leadership term at a time (docs/deploying.md#leader-election).
type Process struct {
	Settings config.ProcessSettings
	// Leases reaches the Lease Settings name; unused without leader
	// election.
	Leases      coordinationv1client.LeasesGetter
	Controllers Controllers

	leading atomic.Bool
	// answered is when (Unix nanoseconds) the apiserver last answered a
	// lease request from storage; 0 before Run.
	answered atomic.Int64
}

// Run returns nil once ctx has ended, the controllers have stopped and,
// under leader election, the lease is released. It returns an error when the
// controllers stop although nothing told them to, or fail while stopping:
// the process cannot do its work then, and a restart is the retry.
func (p *Process) Run(ctx context.Context) error {
	if !p.Settings.LeaderElection {
		return p.runControllers(ctx, ctx)
	}
	// Start-up counts as an answer: the first lease request follows at once.
	p.answered.Store(time.Now().UnixNano())
	lock := answerRecorder{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: p.Settings.LeaseName, Namespace: p.Settings.LeaseNamespace},
			Client:     p.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: p.Settings.PodName},
		},
		answered: &p.answered,
	}
	var err error
	for err == nil && ctx.Err() == nil {
		err = p.campaign(ctx, lock)
	}
	p.release(ctx, lock)
	return err
}

// campaign stands by until it holds the lease, then runs one term. It
// returns at shutdown, or once a lost term's controllers have stopped and
// its elector has stopped, so that two terms never overlap.
func (p *Process) campaign(ctx context.Context, lock resourcelock.Interface) error {
	logger := klog.FromContext(ctx)
	s := p.Settings
	lease := s.LeaseNamespace + "/" + s.LeaseName

	// The elector outlives ctx: it keeps renewing through the controllers'
	// shutdown grace, so no standby takes over before they have stopped.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	terms := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          s.LeaseName,
		LeaseDuration: s.LeaseDuration,
		RenewDeadline: s.RenewDeadline(),
		RetryPeriod:   s.RetryPeriod(),
		// client-go would release the lease as soon as a renewal fails,
		// while the controllers' syncs are still in flight; release does it
		// after.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(termCtx context.Context) { terms <- termCtx },
			// client-go requires it; the end of a term is logged below,
			// where it is known whether the lease was lost.
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != s.PodName {
					logger.Info("Standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()
	defer func() {
		stopElector()
		<-electorDone
	}()

	var termCtx context.Context
	select {
	case <-ctx.Done():
		return nil
	case termCtx = <-terms:
	}
	logger.Info("Leading: starting controllers", "lease", lease, "identity", s.PodName)
	err = p.runControllers(ctx, termCtx)
	if ctx.Err() == nil && termCtx.Err() != nil {
		logger.Info("Not leading", "lease", lease)
		if err != nil {
			logger.Error(err, "Controllers stopped with an error")
		}
		return nil
	}
	return err
}

// runControllers runs one term until termCtx or ctx ends, whichever comes
// first, and reports the controllers stopping before either did.
func (p *Process) runControllers(ctx, termCtx context.Context) error {
	runCtx, stop := context.WithCancel(termCtx)
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	p.leading.Store(true)
	err := p.Controllers.Run(runCtx)
	p.leading.Store(false)
	if runCtx.Err() == nil {
		if err == nil {
			err = errors.New("they returned without an error")
		}
		return fmt.Errorf("controllers stopped on their own: %w", err)
	}
	return err
}

// release gives the lease up once no controller runs any more, so that a
// standby takes over within a retry period instead of when the lease
// expires. A lease this process does not hold is left alone.
func (p *Process) release(ctx context.Context, lock resourcelock.Interface) {
	s := p.Settings
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.RenewDeadline())
	defer cancel()
	released := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		held, _, err := lock.Get(ctx)
		if err != nil || held.HolderIdentity != s.PodName {
			return err
		}
		now := metav1.NewTime(time.Now())
		// The record client-go's own release writes, so that every
		// elector reads it the same way.
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    held.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
		released = err == nil
		return err
	})
	lease := s.LeaseNamespace + "/" + s.LeaseName
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		logger.Error(err, "Could not release the lease; a standby takes over when it expires", "lease", lease)
	case released:
		logger.Info("Released the lease", "lease", lease)
	}
}

// answerRecorder notes when the apiserver answers a lease request from its
// storage (a conflict or a missing lease included: etcd was read), which
// leader and standby alike send every retry period. /readyz reads it.
type answerRecorder struct {
	resourcelock.Interface
	answered *atomic.Int64
}

func (l answerRecorder) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	l.note(err)
	return rec, raw, err
}

func (l answerRecorder) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.note(err)
	return err
}

func (l answerRecorder) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.note(err)
	return err
}

func (l answerRecorder) note(err error) {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		l.answered.Store(time.Now().UnixNano())
	}
}
