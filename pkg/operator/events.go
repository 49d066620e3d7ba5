package operator

import (
	"context"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// Event reasons (docs/crd-reference.md#events).
const (
	EventPhaseChanged       = "PhaseChanged"
	EventUnattendedAdmitted = "UnattendedAdmitted"
	EventReconcileError     = "ReconcileError"
	// EventSandboxAPIUnavailable: a task waits for agent-sandbox to be
	// installed (Warning, once per wait).
	EventSandboxAPIUnavailable = "SandboxAPIUnavailable"
)

// maxNoteBytes is the events.k8s.io/v1 limit on an Event's note.
const maxNoteBytes = 1024

// Recorder emits events.k8s.io/v1 Events. Emitting is best-effort and never
// blocks a sync: client-go queues the write and drops it when the sink
// fails.
type Recorder interface {
	Event(regarding runtime.Object, eventType, reason, action, note string)
}

type recorder struct{ r events.EventRecorder }

func (r recorder) Event(regarding runtime.Object, eventType, reason, action, note string) {
	r.r.Eventf(regarding, nil, eventType, reason, action, "%s", truncateNote(note))
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

// NewEventBroadcaster returns a broadcaster writing to events.k8s.io/v1 whose
// Events name instance as their reporting instance (client-go would use the
// host name): docs/crd-reference.md#events wants CONTROLLER_POD_NAME.
func NewEventBroadcaster(kube kubernetes.Interface, instance string) events.EventBroadcaster {
	var sink events.EventSink = &events.EventSinkImpl{Interface: kube.EventsV1()}
	if instance != "" {
		sink = instanceSink{EventSink: sink, instance: instance}
	}
	return events.NewBroadcaster(sink)
}

// NewRecorder is the recorder the controllers use; scheme must know the
// caliban types so Events can refer to them.
func NewRecorder(b events.EventBroadcaster, scheme *runtime.Scheme) Recorder {
	return recorder{b.NewRecorder(scheme, builders.FieldManager)}
}

type instanceSink struct {
	events.EventSink
	instance string
}

func (s instanceSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	ev.ReportingInstance = s.instance
	return s.EventSink.Create(ctx, ev)
}
