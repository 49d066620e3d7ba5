// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Event reasons (docs/crd-reference.md#events).
const (
	EventPhaseChanged       = "PhaseChanged"
	EventUnattendedAdmitted = "UnattendedAdmitted"
	EventReconcileError     = "ReconcileError"
	// The lifecycle's (docs/crd-reference.md#lifecycle).
	EventDeadlineExceeded = "DeadlineExceeded"
	EventDrained          = "Drained"
	EventDrainFailed      = "DrainFailed"
	EventDrainTimedOut    = "DrainTimedOut"
	// EventSandboxAPIUnavailable: a task waits for agent-sandbox to be
	// installed (Warning, once per wait).
	EventSandboxAPIUnavailable = "SandboxAPIUnavailable"
	// EventServiceFQDNMismatch: a task's Sandbox serves at an address that
	// is not its own Service's, so the task is given no endpoint (Warning,
	// once per message).
	EventServiceFQDNMismatch = builders.ReasonServiceFQDNMismatch
)

// maxNoteBytes is the events.k8s.io/v1 limit on an Event's note.
const maxNoteBytes = 1024

// Recorder emits events.k8s.io/v1 Events. Emitting is best-effort and never
// blocks a sync.
type Recorder interface {
	Event(regarding runtime.Object, eventType, reason, action, note string)
}

// How EventRecorder queues, writes and folds repeats. A burst emits about
// one Event per task. Eight writers taking even 50 ms a create write 160
// Events/s, twice the ~80 tasks/s the apiserver's writes allow on the
// benchmark's machine (whose bursts of 10,000 drop none); the queue, as
// long as client-go's broadcaster's, holds what arrives faster.
const (
	eventQueueLength = 1000
	eventWorkers     = 8
	// An Event identical to one written less than repeatWindow ago (and
	// repeated at least that often since) is not written again: a failure
	// retried with backoff reports once, not once per retry.
	repeatWindow  = 10 * time.Minute
	recentEvents  = 4096
	eventAttempts = 5
)

// eventRetryDelay is the first wait before writing an Event again; a
// variable so that tests need not wait.
var eventRetryDelay = time.Second

// EventRecorder writes Events from a bounded queue with a fixed set of
// workers. client-go's events broadcaster (v0.37) starts a goroutine per
// Event and keeps every Event of the last 6 to 12 minutes in memory to fold
// repeats into series; under a burst of ten thousand tasks that is ten
// thousand goroutines waiting on the apiserver and ten thousand Events held
// (docs/adr/0009). Here repeats are folded by a bounded LRU of keys, and an
// Event that finds the queue full is dropped, as client-go drops one that
// finds its broadcaster's queue full.
type EventRecorder struct {
	client     eventsv1client.EventsGetter
	scheme     *runtime.Scheme
	controller string
	instance   string
	clock      clock.PassiveClock
	queue      chan *eventsv1.Event

	mu sync.Mutex
	// recent maps an Event's identity to when it was last emitted.
	recent *lru.Cache
}

// eventIdentity is what makes two Events the same for folding repeats: the
// object and its version, and everything the Event says about it.
type eventIdentity struct {
	uid                             types.UID
	resourceVersion                 string
	eventType, reason, action, note string
}

// NewEventRecorder returns a recorder whose Events name instance as their
// reporting instance (CONTROLLER_POD_NAME); when instance is empty, the
// controller name and the host name, as client-go would. scheme must know
// the types Events refer to. Call Run to write them.
func NewEventRecorder(client eventsv1client.EventsGetter, scheme *runtime.Scheme, instance string, clk clock.PassiveClock) *EventRecorder {
	if instance == "" {
		instance = builders.FieldManager + "-" + hostname()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &EventRecorder{
		client: client, scheme: scheme, controller: builders.FieldManager, instance: instance, clock: clk,
		queue: make(chan *eventsv1.Event, eventQueueLength), recent: lru.New(recentEvents),
	}
}

// Event queues an Event about regarding, unless an identical one was
// emitted within repeatWindow, or the queue is full.
func (r *EventRecorder) Event(regarding runtime.Object, eventType, reason, action, note string) {
	logger := klog.Background()
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		logger.Error(err, "Not reporting an Event: no reference to its object", "reason", reason)
		return
	}
	note = truncateNote(note)
	now := r.clock.Now()
	id := eventIdentity{uid: ref.UID, resourceVersion: ref.ResourceVersion, eventType: eventType, reason: reason, action: action, note: note}
	if r.repeated(id, now) {
		return
	}
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Note:                note,
		Type:                eventType,
	}
	select {
	case r.queue <- ev:
	default:
		logger.V(2).Info("Dropped an Event: the queue is full", "reason", reason, "regarding", klog.KRef(ref.Namespace, ref.Name))
	}
}

// repeated records that the Event id is emitted at now, and reports whether
// an identical one was emitted within repeatWindow before.
func (r *EventRecorder) repeated(id eventIdentity, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, seen := r.recent.Get(id)
	r.recent.Add(id, now)
	return seen && now.Sub(last.(time.Time)) < repeatWindow
}

// Run writes queued Events until ctx is done; what is still queued then is
// dropped.
func (r *EventRecorder) Run(ctx context.Context) {
	var workers sync.WaitGroup
	for range eventWorkers {
		workers.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-r.queue:
					r.write(ctx, ev)
				}
			}
		})
	}
	workers.Wait()
}

// write creates the Event, trying again with backoff while the apiserver
// cannot be reached; an answer from the apiserver (a rejection, or an Event
// of that name already there) is final.
func (r *EventRecorder) write(ctx context.Context, ev *eventsv1.Event) {
	var err error
	backoff := wait.Backoff{Duration: eventRetryDelay, Factor: 2, Steps: eventAttempts}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, err = r.client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		var status apierrors.APIStatus
		return err == nil || errors.As(err, &status), nil
	})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err), ctx.Err() != nil:
	default:
		klog.FromContext(ctx).Error(err, "Could not write an Event", "reason", ev.Reason,
			"regarding", klog.KRef(ev.Regarding.Namespace, ev.Regarding.Name))
	}
}

// truncateNote cuts a note to the API's limit on a rune boundary.
func truncateNote(note string) string {
	if len(note) <= maxNoteBytes {
		return note
	}
	const ellipsis = "…"
	cut := maxNoteBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + ellipsis
}

// hostname is the host's name, or "" when the system will not say.
func hostname() string {
	name, _ := os.Hostname()
	return name
}

var _ Recorder = (*EventRecorder)(nil)

// phaseNote is the note of a PhaseChanged Event.
func phaseNote(from, to, message string) string {
	if from == "" {
		from = "(none)"
	}
	note := from + " → " + to
	if message != "" {
		note += ": " + message
	}
	return note
}
