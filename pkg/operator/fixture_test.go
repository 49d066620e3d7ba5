// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanfake "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/fake"
	calibantyped "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/caliban/v1alpha1"
	calibaninformerfactory "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions"
	"github.com/caliban-ai/caliban-operator/pkg/operator/codec"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// fixture is the sample-controller test fixture: objects go into the
// informer indexers (what a sync reads) and the fake clientsets (what its
// writes hit); only the sync handler runs, never the informers.
type fixture struct {
	t       testing.TB
	ctx     context.Context
	kube    *k8sfake.Clientset
	caliban *calibanfake.Clientset
	// sandboxClient is the real Sandbox REST client, talking to a test
	// server that answers applies (serveSandboxes).
	sandboxClient rest.Interface
	// taskREST is the REST client the task controller writes status
	// through, talking to a test server that hands each write to the fake
	// clientset (serveTaskStatus).
	taskREST rest.Interface

	calibanInformers calibaninformerfactory.SharedInformerFactory
	kubeInformers    informers.SharedInformerFactory
	sandboxInformer  cache.SharedIndexInformer

	// mu guards what serveSandboxes records.
	mu sync.Mutex
	// sandboxApplies are the bodies of the Sandbox applies, in order.
	sandboxApplies []*unstructured.Unstructured
	// sandboxWrites are those applies as writes lists them.
	sandboxWrites []string
	// sandboxGets counts the GETs of a Sandbox that found one.
	sandboxGets int
	// servedSandboxes are the Sandboxes the cluster has, by key, as
	// cacheSandbox last cached them (the cache itself keeps views).
	servedSandboxes map[string]*sandboxv1beta1.Sandbox
	// onSandboxApply, when set, sees each Sandbox apply or create (verb
	// "patch" or "create") first; an error
	// fails the request with 500.
	onSandboxApply func(verb, name string) error
	events         *fakeRecorder
	clock          *clocktesting.FakeClock
	// sandboxAPI is agent-sandbox's API as the controller sees it: served
	// unless a test says otherwise.
	sandboxAPI fakeSandboxAPI
	// extensionsAPI is agent-sandbox's extensions API: not served unless a
	// test says so.
	extensionsAPI fakeSandboxAPI
	// children is the latest task controller's: cache puts what its
	// transform makes of a child into the child caches, as an informer
	// would.
	children *freshness.Tracker
	// tracer is the controllers' (recordSpans); tracing off unless set.
	tracer tracing.Tracer
	// metrics are the controllers' own, in a registry of their own.
	metrics *Metrics
}

// fakeSandboxAPI answers SandboxAPI with a fixed value.
type fakeSandboxAPI struct{ missing bool }

func (a *fakeSandboxAPI) Served() bool  { return !a.missing }
func (*fakeSandboxAPI) HasSynced() bool { return true }

func newFixture(t testing.TB) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		t:       t,
		ctx:     ctx,
		kube:    k8sfake.NewClientset(),
		caliban: calibanfake.NewClientset(),
		events:  &fakeRecorder{},
		clock:   clocktesting.NewFakeClock(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)),
		metrics: NewMetrics(),

		extensionsAPI: fakeSandboxAPI{missing: true},
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serveSandboxes))
	t.Cleanup(srv.Close)
	sc, err := NewSandboxRESTClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f.sandboxClient = sc
	tasks := httptest.NewServer(http.HandlerFunc(f.serveTaskStatus))
	t.Cleanup(tasks.Close)
	tc, err := NewCalibanClient(&rest.Config{Host: tasks.URL})
	if err != nil {
		t.Fatal(err)
	}
	f.taskREST = tc.CalibanV1alpha1().RESTClient()
	f.calibanInformers = calibaninformerfactory.NewSharedInformerFactory(f.caliban, 0)
	f.kubeInformers = informers.NewSharedInformerFactory(f.kube, 0)
	// Never run: tests fill its store, like the generated informers'.
	f.sandboxInformer = cache.NewSharedIndexInformer(&cache.ListWatch{}, &sandboxv1beta1.Sandbox{}, 0, cache.Indexers{})
	return f
}

// serveTaskStatus answers the status applies the task controller makes
// through its REST client (record) from the fake clientset, so that its
// reactors and recorded actions see them as they see every other write.
func (f *fixture) serveTaskStatus(w http.ResponseWriter, r *http.Request) {
	// /apis/<group>/<version>/namespaces/<ns>/calibantasks/<name>/status
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodPatch || len(parts) != 8 || parts[5] != taskResource || parts[7] != "status" {
		http.Error(w, "not a task status apply: "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	opts := metav1.PatchOptions{FieldManager: r.URL.Query().Get("fieldManager"), Force: new(r.URL.Query().Get("force") == "true")}
	task, err := f.caliban.CalibanV1alpha1().CalibanTasks(parts[4]).Patch(r.Context(), parts[6], types.PatchType(r.Header.Get("Content-Type")), body, opts, "status")
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := apierrors.APIStatus(nil)
		if !errors.As(err, &status) {
			status = apierrors.NewInternalError(err)
		}
		st := status.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		w.WriteHeader(int(st.Code))
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	// The fake keeps a version as it is; the apiserver gives each write a
	// later one, which the task cache tells its own writes apart by.
	if n, err := strconv.Atoi(task.ResourceVersion); err == nil {
		task.ResourceVersion = strconv.Itoa(n + 10)
		if err := f.caliban.Tracker().Update(calibanv1alpha1.SchemeGroupVersion.WithResource(taskResource), task, task.Namespace); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	_ = json.NewEncoder(w).Encode(task)
}

// calibanClients is the fake clientset with the REST client of
// serveTaskStatus, which the fake's own (nil) cannot stand in for.
type calibanClients struct {
	*calibanfake.Clientset
	rest rest.Interface
}

func (c calibanClients) CalibanV1alpha1() calibantyped.CalibanV1alpha1Interface {
	return calibanGroupClient{c.Clientset.CalibanV1alpha1(), c.rest}
}

type calibanGroupClient struct {
	calibantyped.CalibanV1alpha1Interface
	rest rest.Interface
}

func (c calibanGroupClient) RESTClient() rest.Interface { return c.rest }

// serveSandboxes is agent-sandbox's API as far as the task controller uses
// it: it answers a server-side apply of a Sandbox with the applied object,
// as a create would (no schema here to merge it with), and records it.
func (f *fixture) serveSandboxes(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	q := r.URL.Query()
	if r.Method == http.MethodGet {
		f.serveSandboxGet(w, r.URL.Path)
		return
	}
	if r.Method == http.MethodPatch && r.Header.Get("Content-Type") == string(types.JSONPatchType) {
		f.serveSandboxJSONPatch(w, r, name)
		return
	}
	if r.Method == http.MethodDelete {
		f.serveSandboxDelete(w, r, name)
		return
	}
	create := r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/json" && q.Get("fieldManager") == builders.FieldManager
	if create {
		f.mu.Lock()
		_, exists := f.servedSandboxes[strings.Split(strings.Trim(r.URL.Path, "/"), "/")[4]+"/"+f.postedName(r)]
		f.mu.Unlock()
		if exists {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists","code":409}`))
			return
		}
	}
	if !create && (r.Method != http.MethodPatch || r.Header.Get("Content-Type") != "application/apply-patch+yaml" ||
		q.Get("fieldManager") != builders.FieldManager || q.Get("force") != "true") {
		f.t.Errorf("Sandbox API: unexpected %s %s (%s)", r.Method, r.URL, r.Header.Get("Content-Type"))
		http.Error(w, "unexpected request", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	u := &unstructured.Unstructured{}
	if err == nil {
		err = json.Unmarshal(body, &u.Object)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	verb := "patch"
	if create {
		verb, name = "create", u.GetName()
	}
	f.mu.Lock()
	hook := f.onSandboxApply
	f.mu.Unlock()
	if hook != nil {
		if err := hook(verb, name); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	f.mu.Lock()
	f.sandboxApplies = append(f.sandboxApplies, u)
	f.sandboxWrites = append(f.sandboxWrites, verb+" sandboxes "+name)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// postedName is the name in the body of a create, which its path leaves
// out; the body is read again by the handler.
func (f *fixture) postedName(r *http.Request) string {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return ""
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	var meta struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(body, &meta)
	return meta.Metadata.Name
}

// serveSandboxJSONPatch applies a JSON patch to a Sandbox the test serves
// (a warm task's), as the apiserver would: a failed test is a 422 and
// changes nothing.
func (f *fixture) serveSandboxJSONPatch(w http.ResponseWriter, r *http.Request, name string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	key := parts[4] + "/" + name
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, exists := f.servedSandboxes[key]
	if !exists {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	patch, err := jsonpatch.DecodePatch(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	doc, err := json.Marshal(sb)
	if err == nil {
		doc, err = patch.Apply(doc)
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,"message":%q}`, err.Error())
		return
	}
	patched := &sandboxv1beta1.Sandbox{}
	if err := json.Unmarshal(doc, patched); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.servedSandboxes[key] = patched
	f.sandboxWrites = append(f.sandboxWrites, "jsonpatch sandboxes "+name)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

// serveSandboxGet answers a GET of one Sandbox with what the test last
// put into the Sandbox cache (cacheSandbox), which stands for the
// cluster's Sandboxes.
func (f *fixture) serveSandboxGet(w http.ResponseWriter, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// apis/agents.x-k8s.io/v1beta1/namespaces/<ns>/sandboxes/<name>
	if len(parts) != 7 || parts[3] != "namespaces" || parts[5] != builders.SandboxResource {
		f.t.Errorf("Sandbox API: unexpected GET %s", path)
		http.Error(w, "unexpected request", http.StatusMethodNotAllowed)
		return
	}
	f.mu.Lock()
	sb, exists := f.servedSandboxes[parts[4]+"/"+parts[6]]
	f.mu.Unlock()
	if !exists {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	f.mu.Lock()
	f.sandboxGets++
	f.mu.Unlock()
	body, err := json.Marshal(sb)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// servedChildren are the task's ServiceAccount and NetworkPolicy as the
// fake clientset holds them after a sync applied them.
func (f *fixture) servedChildren(tk *calibanv1alpha1.CalibanTask) (*corev1.ServiceAccount, *networkingv1.NetworkPolicy) {
	f.t.Helper()
	sa, err := f.kube.CoreV1().ServiceAccounts(tk.Namespace).Get(f.ctx, builders.ServiceAccountName(tk.Name), metaGet)
	if err != nil {
		f.t.Fatal(err)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies(tk.Namespace).Get(f.ctx, builders.NetworkPolicyName(tk.Name), metaGet)
	if err != nil {
		f.t.Fatal(err)
	}
	return sa, np
}

// appliedSandboxes are the Sandbox applies so far.
func (f *fixture) appliedSandboxes() []*unstructured.Unstructured {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*unstructured.Unstructured(nil), f.sandboxApplies...)
}

// lastSandboxApply is the body of the latest Sandbox apply.
func (f *fixture) lastSandboxApply() *unstructured.Unstructured {
	f.t.Helper()
	all := f.appliedSandboxes()
	if len(all) == 0 {
		f.t.Fatal("no Sandbox was applied")
	}
	return all[len(all)-1]
}

// cacheSandbox puts a Sandbox, given as the JSON object it is on the wire,
// into the Sandbox cache in the typed form the informer decodes it to.
func (f *fixture) cacheSandbox(u *unstructured.Unstructured) {
	f.t.Helper()
	sb := watchedSandbox(f.t, u)
	f.mu.Lock()
	if f.servedSandboxes == nil {
		f.servedSandboxes = map[string]*sandboxv1beta1.Sandbox{}
	}
	f.servedSandboxes[sb.Namespace+"/"+sb.Name] = sb.DeepCopy()
	f.mu.Unlock()
	f.cache(f.sandboxInformer, sb)
}

// serveSandboxDelete deletes a served Sandbox as the apiserver does: not
// found when it is gone, a conflict when the UID precondition names
// another; it records the delete.
func (f *fixture) serveSandboxDelete(w http.ResponseWriter, r *http.Request, name string) {
	var opts metav1.DeleteOptions
	if body, err := io.ReadAll(r.Body); err == nil && len(body) > 0 {
		_ = json.Unmarshal(body, &opts)
	}
	status := func(code int, reason string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
	}
	ns := strings.Split(strings.Trim(r.URL.Path, "/"), "/")[4]
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.servedSandboxes[ns+"/"+name]
	switch {
	case !ok:
		status(http.StatusNotFound, string(metav1.StatusReasonNotFound))
	case opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != sb.UID:
		status(http.StatusConflict, string(metav1.StatusReasonConflict))
	default:
		delete(f.servedSandboxes, ns+"/"+name)
		f.sandboxWrites = append(f.sandboxWrites, "delete sandboxes "+name)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}
}

// watchedSandbox is a Sandbox as the informer's watch decodes it: typed,
// and without its kind.
func watchedSandbox(t testing.TB, u *unstructured.Unstructured) *sandboxv1beta1.Sandbox {
	t.Helper()
	body, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.Decode(watchDecoder, body)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*sandboxv1beta1.Sandbox)
}

// watchDecoder decodes JSON as the Sandbox REST client does.
var watchDecoder = func() runtime.Decoder {
	codecs := codec.JSON(sandboxScheme)
	return codecs.DecoderToVersion(codecs.SupportedMediaTypes()[0].Serializer, sandboxv1beta1.SchemeGroupVersion)
}()

// deps are what the fixture's controllers are built from: its fakes,
// caches and clock, real metrics, and the default settings.
func (f *fixture) deps() Deps {
	return Deps{
		Clients:         Clients{Kube: f.kube, Caliban: calibanClients{f.caliban, f.taskREST}, Sandboxes: f.sandboxClient, Extensions: f.caliban},
		Tasks:           f.calibanInformers.Caliban().V1alpha1().CalibanTasks(),
		Workspaces:      f.calibanInformers.Caliban().V1alpha1().Workspaces(),
		ServiceAccounts: f.kubeInformers.Core().V1().ServiceAccounts(),
		NetworkPolicies: f.kubeInformers.Networking().V1().NetworkPolicies(),
		Sandboxes:       f.sandboxInformer, SandboxAPI: &f.sandboxAPI, Warm: f.warmInformers(),
		Settings: config.DefaultAgentSettings(), DrainTimeout: config.DefaultTaskDrainTimeout, ShutdownGrace: config.DefaultShutdownGrace,
		PinKey: fixturePinKey, Recorder: f.events, Metrics: f.metrics, Tracer: f.tracer, Clock: f.clock,
	}
}

func (f *fixture) taskController() *TaskController {
	f.t.Helper()
	c, err := NewTaskController(f.deps())
	if err != nil {
		f.t.Fatal(err)
	}
	f.children = c.children
	return c
}

// warmInformers are the extensions' informers, from the caliban informer
// factory (the operator has a factory of its own for them).
func (f *fixture) warmInformers() WarmPoolInformers {
	ext := f.calibanInformers.Extensions().V1beta1()
	return WarmPoolInformers{API: &f.extensionsAPI, Client: f.caliban.ExtensionsV1beta1(), Templates: ext.SandboxTemplates(), Pools: ext.SandboxWarmPools(), Claims: ext.SandboxClaims(),
		ServiceAccounts: f.kubeInformers.Core().V1().ServiceAccounts(), NetworkPolicies: f.kubeInformers.Networking().V1().NetworkPolicies()}
}

// fixturePinKey signs the fixtures' pins; tasks created before its Since
// (the fixtures' zero creationTimestamp among them) are legacy.
var fixturePinKey = builders.PinKey{Key: []byte("the fixtures' pin key, 32 bytes."), Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}

// childInformers are the child informers by kind.
func (f *fixture) childInformers() map[freshness.Kind]cache.SharedIndexInformer {
	return map[freshness.Kind]cache.SharedIndexInformer{
		freshness.ServiceAccount: f.kubeInformers.Core().V1().ServiceAccounts().Informer(),
		freshness.NetworkPolicy:  f.kubeInformers.Networking().V1().NetworkPolicies().Informer(),
		freshness.Sandbox:        f.sandboxInformer,
	}
}

func (f *fixture) workspaceController() *WorkspaceController {
	f.t.Helper()
	c, err := NewWorkspaceController(f.deps())
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// provisionedTask is a task admitted, pinned and given its children by one
// sync, with every write fed back into the caches.
func (f *fixture) provisionedTask() (*TaskController, *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	c, tk, _ := f.syncedOnce()
	f.feedBack(c, tk)
	return c, tk
}

// syncedOnce is a task admitted, pinned and given its children by one
// sync, whose writes the caches have not seen: the controller, the task as
// seeded, and the task as the cluster holds it now.
func (f *fixture) syncedOnce() (*TaskController, *calibanv1alpha1.CalibanTask, *calibanv1alpha1.CalibanTask) {
	f.t.Helper()
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		f.t.Fatal(err)
	}
	stored, err := f.caliban.CalibanV1alpha1().CalibanTasks(tk.Namespace).Get(f.ctx, tk.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c, tk, stored
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
// would have delivered after a write, a child as its transform views it.
func (f *fixture) cache(inf cache.SharedIndexInformer, obj any) {
	f.t.Helper()
	switch obj.(type) {
	case *corev1.ServiceAccount, *networkingv1.NetworkPolicy, *sandboxv1beta1.Sandbox:
		if f.children == nil {
			f.t.Fatal("a child cached before there is a task controller to view it")
		}
		var err error
		if obj, err = f.children.Transform(obj); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := inf.GetIndexer().Update(obj); err != nil {
		f.t.Fatal(err)
	}
}

// writes are the write actions each fake saw since the last reset, as
// "verb resource[/subresource] name".
func (f *fixture) writes() []string {
	var out []string
	for _, actions := range [][]core.Action{f.kube.Actions(), f.caliban.Actions()} {
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
				if c, ok := a.(core.CreateAction); ok {
					if o, err := apimeta.Accessor(c.GetObject()); err == nil {
						name = o.GetName()
					}
				}
				out = append(out, a.GetVerb()+" "+res+" "+name)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(out, f.sandboxWrites...)
}

func (f *fixture) resetActions() {
	f.kube.ClearActions()
	f.caliban.ClearActions()
	f.mu.Lock()
	f.sandboxWrites = nil
	f.mu.Unlock()
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
