package operator

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanfake "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/fake"
	calibaninformerfactory "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions"
)

// fixture is the sample-controller test fixture: objects go into the
// informer indexers (what a sync reads) and the fake clientsets (what its
// writes hit); only the sync handler runs, never the informers.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	kube    *k8sfake.Clientset
	caliban *calibanfake.Clientset
	dynamic *dynamicfake.FakeDynamicClient

	calibanInformers calibaninformerfactory.SharedInformerFactory
	kubeInformers    informers.SharedInformerFactory
	dynInformers     dynamicinformer.DynamicSharedInformerFactory

	// sandboxApplies are the Sandboxes applied through the dynamic client.
	sandboxApplies []*unstructured.Unstructured
	events         *fakeRecorder
	clock          *clocktesting.FakeClock
	// sandboxAPI is agent-sandbox's API as the controller sees it: served
	// unless a test says otherwise.
	sandboxAPI fakeSandboxAPI
}

// fakeSandboxAPI answers SandboxAPI with a fixed value.
type fakeSandboxAPI struct{ missing bool }

func (a *fakeSandboxAPI) Served() bool  { return !a.missing }
func (*fakeSandboxAPI) HasSynced() bool { return true }

func newFixture(t *testing.T) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		t:       t,
		ctx:     ctx,
		kube:    k8sfake.NewClientset(),
		caliban: calibanfake.NewClientset(),
		dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{sandboxGVR: "SandboxList"}),
		events: &fakeRecorder{},
		clock:  clocktesting.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)),
	}
	// The dynamic fake has no schema for Sandboxes to merge an apply with:
	// answer an apply with what was applied, as a create would.
	f.dynamic.PrependReactor("patch", "sandboxes", func(a core.Action) (bool, runtime.Object, error) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(a.(core.PatchAction).GetPatch(), &u.Object); err != nil {
			return true, nil, err
		}
		f.sandboxApplies = append(f.sandboxApplies, u)
		return true, u, nil
	})
	f.calibanInformers = calibaninformerfactory.NewSharedInformerFactory(f.caliban, 0)
	f.kubeInformers = informers.NewSharedInformerFactory(f.kube, 0)
	f.dynInformers = dynamicinformer.NewDynamicSharedInformerFactory(f.dynamic, 0)
	return f
}

func (f *fixture) taskController() *TaskController {
	f.t.Helper()
	c, err := NewTaskController(f.caliban, f.kube, f.dynamic,
		f.calibanInformers.Caliban().V1alpha1().CalibanTasks(),
		f.calibanInformers.Caliban().V1alpha1().Workspaces(),
		f.kubeInformers.Core().V1().ServiceAccounts(),
		f.kubeInformers.Networking().V1().NetworkPolicies(),
		f.dynInformers.ForResource(sandboxGVR), &f.sandboxAPI,
		builders.DefaultAgentSettings(), f.events, nil, f.clock)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) workspaceController() *WorkspaceController {
	f.t.Helper()
	c, err := NewWorkspaceController(f.caliban, f.kube, f.calibanInformers.Caliban().V1alpha1().Workspaces(),
		builders.DefaultAgentSettings(), f.events, nil, f.clock)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// provisionedTask is a task admitted, pinned and given its children by one
// sync, with every write fed back into the caches.
func (f *fixture) provisionedTask() (*TaskController, *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	if _, err := c.syncTask(f.ctx, key(tk)); err != nil {
		f.t.Fatal(err)
	}
	f.feedBack(c, tk)
	return c, tk
}

// seed puts objects into the informer caches and the fake clientsets.
func (f *fixture) seed(objs ...runtime.Object) {
	f.t.Helper()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *calibanv1alpha1.CalibanTask:
			err = f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Informer().GetIndexer().Add(o)
			if err == nil {
				err = f.caliban.Tracker().Add(o)
			}
		case *calibanv1alpha1.Workspace:
			err = f.calibanInformers.Caliban().V1alpha1().Workspaces().Informer().GetIndexer().Add(o)
			if err == nil {
				err = f.caliban.Tracker().Add(o)
			}
		case *corev1.Secret:
			err = f.kube.Tracker().Add(o)
		default:
			f.t.Fatalf("cannot seed %T", obj)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

// cache replaces an object in an informer cache only: what the informer
// would have delivered after a write.
func (f *fixture) cache(inf cache.SharedIndexInformer, obj any) {
	f.t.Helper()
	if err := inf.GetIndexer().Update(obj); err != nil {
		f.t.Fatal(err)
	}
}

// writes are the write actions each fake saw since the last reset, as
// "verb resource[/subresource] name".
func (f *fixture) writes() []string {
	var out []string
	for _, actions := range [][]core.Action{f.kube.Actions(), f.caliban.Actions(), f.dynamic.Actions()} {
		for _, a := range actions {
			switch a.GetVerb() {
			case "get", "list", "watch":
			default:
				res := a.GetResource().Resource
				if a.GetSubresource() != "" {
					res += "/" + a.GetSubresource()
				}
				name := ""
				if n, ok := a.(interface{ GetName() string }); ok {
					name = n.GetName()
				}
				out = append(out, a.GetVerb()+" "+res+" "+name)
			}
		}
	}
	return out
}

func (f *fixture) resetActions() {
	f.kube.ClearActions()
	f.caliban.ClearActions()
	f.dynamic.ClearActions()
	f.events.events = nil
}

var metaGet = metav1.GetOptions{}

func key(obj metav1.Object) cache.ObjectName {
	return cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

type recordedEvent struct{ eventType, reason, note string }

type fakeRecorder struct{ events []recordedEvent }

func (r *fakeRecorder) Event(_ runtime.Object, eventType, reason, _, note string) {
	r.events = append(r.events, recordedEvent{eventType, reason, note})
}

func (r *fakeRecorder) reasons() []string {
	var out []string
	for _, e := range r.events {
		out = append(out, e.reason)
	}
	return out
}

// Fixture builders.

func workspace(mods ...func(*calibanv1alpha1.Workspace)) *calibanv1alpha1.Workspace {
	ws := &calibanv1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team", UID: "ws-uid", Generation: 1, ResourceVersion: "1"},
		Spec: calibanv1alpha1.WorkspaceSpec{
			DisplayName: "ws",
			Providers: []calibanv1alpha1.Provider{{Name: "planner", Kind: "anthropic",
				CredentialsRef: &calibanv1alpha1.SecretKeyRef{SecretName: "key", Key: "api-key"}}},
		},
		Status: calibanv1alpha1.WorkspaceStatus{Phase: calibanv1alpha1.WorkspaceReady, ObservedGeneration: 1},
	}
	for _, m := range mods {
		m(ws)
	}
	return ws
}

func task(mods ...func(*calibanv1alpha1.CalibanTask)) *calibanv1alpha1.CalibanTask {
	t := &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-bug", Namespace: "team", UID: "task-uid", Generation: 1, ResourceVersion: "1"},
		Spec: calibanv1alpha1.CalibanTaskSpec{
			WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: "ws"},
			Task:         calibanv1alpha1.TaskDefinition{Prompt: "fix it", PermissionPosture: calibanv1alpha1.PostureSupervised},
		},
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

func secret(name string, keys ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Data: map[string][]byte{}}
	for _, k := range keys {
		s.Data[k] = []byte("x")
	}
	return s
}
