// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/pkg/operator/freshness"
)

func TestTheSandboxListWatchDecodesTypedSandboxes(t *testing.T) {
	// A Sandbox as the apiserver sends it, with fields the operator's view
	// does not declare (replicas) and managedFields.
	const sandbox = `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox",
		"metadata":{"name":"t-sbx","namespace":"team","uid":"u1","resourceVersion":"7","generation":2,
			"labels":{"app.kubernetes.io/managed-by":"caliban-operator"},
			"annotations":{"caliban.caliban-ai.dev/applied-hash":"h"},
			"managedFields":[{"manager":"caliban-operator","operation":"Apply"}]},
		"spec":{"operatingMode":"Running","replicas":1},
		"status":{"serviceFQDN":"t-sbx.team.svc","replicas":1}}`
	want := &sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "t-sbx", Namespace: "team", UID: "u1", ResourceVersion: "7", Generation: 2,
			Labels:        map[string]string{"app.kubernetes.io/managed-by": "caliban-operator"},
			Annotations:   map[string]string{builders.AnnotationAppliedHash: "h"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "caliban-operator", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec:   sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.OperatingModeRunning},
		Status: sandboxv1beta1.SandboxStatus{ServiceFQDN: "t-sbx.team.svc"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/agents.x-k8s.io/v1beta1/namespaces/team/sandboxes" ||
			r.URL.Query().Get("labelSelector") != "app.kubernetes.io/managed-by=caliban-operator" {
			t.Errorf("unexpected request %s", r.URL)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = io.WriteString(w, `{"type":"MODIFIED","object":`+sandbox+"}\n")
			return
		}
		_, _ = io.WriteString(w, `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxList","metadata":{"resourceVersion":"9"},"items":[`+sandbox+`]}`)
	}))
	defer srv.Close()
	client, err := NewSandboxRESTClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	lw := sandboxListWatch(client, "team", func(o *metav1.ListOptions) {
		o.LabelSelector = "app.kubernetes.io/managed-by=caliban-operator"
	})
	ctx := t.Context()

	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*sandboxv1beta1.SandboxList)
	if !ok || len(list.Items) != 1 || list.ResourceVersion != "9" {
		t.Fatalf("list = %#v, want one Sandbox at resourceVersion 9", obj)
	}
	if diff := cmp.Diff(want, &list.Items[0]); diff != "" {
		t.Errorf("listed Sandbox (-want +got):\n%s", diff)
	}

	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "9"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := <-w.ResultChan()
	if !ok || ev.Type != watch.Modified {
		t.Fatalf("watch event = %v %v, want MODIFIED", ev.Type, ok)
	}
	// Like a generated clientset's, the client does not keep the kind of
	// what it decodes from a watch.
	want.TypeMeta = metav1.TypeMeta{}
	if diff := cmp.Diff(want, ev.Object); diff != "" {
		t.Errorf("watched Sandbox (-want +got):\n%s", diff)
	}
}

func TestAChildIsCheckedAgainstThePinItsTaskJustWrote(t *testing.T) {
	f := newFixture(t)
	tk := task()
	f.seed(tk, workspace(), secret("key", "api-key"))
	c := f.taskController()
	// The server answers the pin's write with a newer resourceVersion, as
	// a real one does (the fake keeps the one it is sent).
	f.caliban.PrependReactor("patch", "calibantasks", func(a core.Action) (bool, runtime.Object, error) {
		var body struct {
			Status calibanv1alpha1.CalibanTaskStatus `json:"status"`
		}
		if err := json.Unmarshal(a.(core.PatchAction).GetPatch(), &body); err != nil {
			return true, nil, err
		}
		written := tk.DeepCopy()
		written.Status, written.ResourceVersion = body.Status, "2"
		return true, written, nil
	})
	if _, err := c.sync(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	// The informer has not brought the pinned task yet: the cache holds it
	// unpinned, as seeded. The children's events arrive now.
	cached, err := f.calibanInformers.Caliban().V1alpha1().CalibanTasks().Lister().CalibanTasks(tk.Namespace).Get(tk.Name)
	if err != nil || cached.Status.ResolvedWorkspace != nil {
		t.Fatalf("the task cache should still hold the unpinned task: %v", err)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies(tk.Namespace).Get(f.ctx, builders.NetworkPolicyName(tk.Name), metaGet)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.children.Transform(np)
	if err != nil {
		t.Fatal(err)
	}
	if v.(*freshness.View).Holds == "" {
		t.Error("the NetworkPolicy the sync just applied was not found to hold what its task wants")
	}

	// A task the caches know nothing of vouches for nothing.
	other := np.DeepCopy()
	other.OwnerReferences[0].UID = "someone-else"
	v, err = c.children.Transform(other)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*freshness.View).Holds; got != "" {
		t.Errorf("a child of an unknown task holds %q", got)
	}
}

// At start-up the children's events arrive before any sync: their transform
// hashes what it renders into the memo, so the task's first sync has
// nothing left to render.
func TestTheChildrenSeenAtStartUpLeaveTheirTaskNothingToRender(t *testing.T) {
	f := newFixture(t)
	restarted, tk := f.provisionedTask()
	stored, err := f.caliban.CalibanV1alpha1().CalibanTasks(tk.Namespace).Get(f.ctx, tk.Name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	sa, np := f.servedChildren(tk)
	sb := watchedSandbox(t, f.lastSandboxApply())

	restartWith(t, f, restarted, config.DefaultAgentSettings()) // a new term: an empty memo
	for _, child := range []any{sa, np, sb} {
		v, err := restarted.children.Transform(child)
		if err != nil {
			t.Fatal(err)
		}
		if v.(*freshness.View).Holds == "" {
			t.Fatalf("%T was found wanting", child)
		}
	}
	got, err := restarted.children.Want(stored, stored.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rendered() {
		t.Error("the first sync rendered the children again")
	}
	want, err := got.Render()
	if err != nil {
		t.Fatal(err)
	}
	if got.ChildHashes != want.Hashes {
		t.Errorf("memoized hashes %+v, rendered %+v", got.Hashes, want.Hashes)
	}
}

// The sync that pins a task renders its children from the pin as written
// and remembers their hashes for the version it wrote: the children's
// events that follow are checked without hashing anything again.
func TestThePinningSyncRemembersTheChildHashes(t *testing.T) {
	c, _, stored := newFixture(t).syncedOnce()
	got, err := c.children.Want(stored, stored.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rendered() {
		t.Fatalf("after the pinning sync the memo has nothing for version %q", stored.ResourceVersion)
	}
	want, err := got.Render()
	if err != nil {
		t.Fatal(err)
	}
	if got.ChildHashes != want.Hashes {
		t.Errorf("memoized hashes %+v, rendered from the stored pin %+v", got.Hashes, want.Hashes)
	}
}
