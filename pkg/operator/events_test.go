// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
)

var eventScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, calibanscheme.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func newTestRecorder(kube *k8sfake.Clientset, clk *clocktesting.FakeClock) *EventRecorder {
	return NewEventRecorder(kube.EventsV1(), eventScheme, "operator-0", clk)
}

// runRecorder runs r until the test ends.
func runRecorder(t *testing.T, r *EventRecorder) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// createdEvents waits until the fake clientset saw n Event creates, and
// returns them.
func createdEvents(t *testing.T, kube *k8sfake.Clientset, n int) []*eventsv1.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out []*eventsv1.Event
		for _, a := range kube.Actions() {
			if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == "events" {
				out = append(out, c.GetObject().(*eventsv1.Event))
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			if len(out) != n {
				t.Fatalf("%d Events created, want %d", len(out), n)
			}
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTheRecorderWritesAnEventAboutTheObject(t *testing.T) {
	kube := k8sfake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))
	r := newTestRecorder(kube, clk)
	runRecorder(t, r)

	tk := task()
	r.Event(tk, "Normal", EventPhaseChanged, "Reconcile", "Pending → Provisioning")
	ev := createdEvents(t, kube, 1)[0]

	if !strings.HasPrefix(ev.Name, tk.Name+".") || ev.Namespace != tk.Namespace {
		t.Errorf("the Event is %s/%s, want %s/%s.<time>", ev.Namespace, ev.Name, tk.Namespace, tk.Name)
	}
	if !ev.EventTime.Time.Equal(clk.Now()) {
		t.Errorf("eventTime %v, want the clock's %v", ev.EventTime, clk.Now())
	}
	got := []string{ev.Type, ev.Reason, ev.Action, ev.Note, ev.ReportingController, ev.ReportingInstance,
		ev.Regarding.APIVersion, ev.Regarding.Kind, ev.Regarding.Name, string(ev.Regarding.UID), ev.Regarding.ResourceVersion}
	want := []string{"Normal", EventPhaseChanged, "Reconcile", "Pending → Provisioning", "caliban-operator", "operator-0",
		calibanv1alpha1.SchemeGroupVersion.String(), "CalibanTask", tk.Name, string(tk.UID), tk.ResourceVersion}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Event (-want +got):\n%s", diff)
	}
	if ev.Series != nil {
		t.Errorf("a first Event has series %+v", ev.Series)
	}
}

func TestWithoutAnInstanceTheEventNamesTheHost(t *testing.T) {
	r := NewEventRecorder(k8sfake.NewClientset().EventsV1(), eventScheme, "", nil)
	if want := "caliban-operator-" + hostname(); r.instance != want {
		t.Errorf("reporting instance %q, want %q", r.instance, want)
	}
}

func TestRepeatedEventsAreFolded(t *testing.T) {
	type emit struct {
		after  time.Duration // since the previous Event
		note   string
		bumpRV bool // the task has a new resourceVersion
	}
	cases := map[string]struct {
		emits []emit
		// written are the notes queued, in order.
		written []string
	}{
		"an identical Event soon after is not written again": {
			emits:   []emit{{note: "boom"}, {after: time.Minute, note: "boom"}},
			written: []string{"boom"},
		},
		"an identical Event after the window is written again": {
			emits:   []emit{{note: "boom"}, {after: repeatWindow, note: "boom"}},
			written: []string{"boom", "boom"},
		},
		"a failure retried more often than the window stays folded": {
			emits:   []emit{{note: "boom"}, {after: repeatWindow - time.Second, note: "boom"}, {after: repeatWindow - time.Second, note: "boom"}},
			written: []string{"boom"},
		},
		"another note is another Event": {
			emits:   []emit{{note: "boom"}, {note: "bang"}},
			written: []string{"boom", "bang"},
		},
		"a new version of the object is another Event": {
			emits:   []emit{{note: "boom"}, {note: "boom", bumpRV: true}},
			written: []string{"boom", "boom"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))
			r := newTestRecorder(k8sfake.NewClientset(), clk)
			tk := task()
			for _, e := range tc.emits {
				clk.Step(e.after)
				if e.bumpRV {
					tk = tk.DeepCopy()
					tk.ResourceVersion = tk.ResourceVersion + "1"
				}
				r.Event(tk, "Warning", EventReconcileError, "Reconcile", e.note)
			}
			var got []string
			for len(r.queue) > 0 {
				got = append(got, (<-r.queue).Note)
			}
			if diff := cmp.Diff(tc.written, got); diff != "" {
				t.Errorf("notes queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAFullQueueDropsTheEventWithoutBlocking(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))
	r := newTestRecorder(k8sfake.NewClientset(), clk)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range eventQueueLength + 10 {
			tk := task()
			tk.ResourceVersion = strconv.Itoa(i) // a distinct Event each
			r.Event(tk, "Normal", EventPhaseChanged, "Reconcile", "Pending → Provisioning")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Event blocked on a full queue")
	}
	if len(r.queue) != eventQueueLength {
		t.Errorf("%d Events queued, want the queue's length %d", len(r.queue), eventQueueLength)
	}
}

func TestWritingAnEventRetriesOnlyWhatMaySucceedLater(t *testing.T) {
	defer func(d time.Duration) { eventRetryDelay = d }(eventRetryDelay)
	eventRetryDelay = time.Millisecond
	cases := map[string]struct {
		failures []error // answered to the first creates, in order
		creates  int     // create requests made
		written  bool
	}{
		"a transport error is tried again": {
			failures: []error{errors.New("connection refused"), errors.New("connection reset")},
			creates:  3, written: true,
		},
		"the apiserver's rejection is final": {
			failures: []error{apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x", errors.New("no"))},
			creates:  1,
		},
		"the apiserver unreachable throughout gives up": {
			failures: []error{errors.New("a"), errors.New("b"), errors.New("c"), errors.New("d"), errors.New("e"), errors.New("f")},
			creates:  eventAttempts,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := k8sfake.NewClientset()
			creates := 0
			kube.PrependReactor("create", "events", func(core.Action) (bool, runtime.Object, error) {
				creates++
				if creates <= len(tc.failures) {
					return true, nil, tc.failures[creates-1]
				}
				return false, nil, nil
			})
			r := newTestRecorder(kube, clocktesting.NewFakeClock(time.Now()))
			tk := task()
			r.Event(tk, "Normal", EventPhaseChanged, "Reconcile", "Pending → Provisioning")
			r.write(context.Background(), <-r.queue)
			if creates != tc.creates {
				t.Errorf("%d creates, want %d", creates, tc.creates)
			}
			list, err := kube.EventsV1().Events(tk.Namespace).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if written := len(list.Items) == 1; written != tc.written {
				t.Errorf("Event stored: %v, want %v", written, tc.written)
			}
		})
	}
}

func TestALongNoteIsCutOnARuneBoundary(t *testing.T) {
	note := strings.Repeat("é", maxNoteBytes) // two bytes each
	got := truncateNote(note)
	if len(got) > maxNoteBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("cut note: %d bytes, valid UTF-8 %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-6:])
	}
	if short := "Pending → Provisioning"; truncateNote(short) != short {
		t.Errorf("a short note was changed")
	}
}
