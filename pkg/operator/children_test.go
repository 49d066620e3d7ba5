package operator

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

func TestSandboxView(t *testing.T) {
	sandbox := func(spec any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{
				"name": "t-sbx", "namespace": "team", "uid": "u1", "resourceVersion": "7", "generation": int64(2),
				"labels":        map[string]any{"app.kubernetes.io/managed-by": "caliban-operator"},
				"annotations":   map[string]any{AnnotationAppliedHash: "h"},
				"managedFields": []any{map[string]any{"manager": "caliban-operator", "operation": "Apply"}},
			},
			"spec":   spec,
			"status": map[string]any{"serviceFQDN": "t-sbx.team.svc"},
		}}
	}
	meta := metav1.ObjectMeta{
		Name: "t-sbx", Namespace: "team", UID: "u1", ResourceVersion: "7", Generation: 2,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "caliban-operator"},
		Annotations: map[string]string{AnnotationAppliedHash: "h"},
	}
	tests := map[string]struct {
		in   any
		want any
	}{
		"a Sandbox becomes its typed view without managedFields": {
			in: sandbox(map[string]any{"operatingMode": "Running", "replicas": int64(1)}),
			want: &sandboxv1beta1.Sandbox{
				TypeMeta:   metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
				ObjectMeta: meta,
				Spec:       sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.OperatingModeRunning},
				Status:     sandboxv1beta1.SandboxStatus{ServiceFQDN: "t-sbx.team.svc"},
			},
		},
		"a Sandbox that does not fit the view keeps its metadata, so the sync applies it again": {
			in: sandbox(map[string]any{"podTemplate": "not an object"}),
			want: &sandboxv1beta1.Sandbox{
				TypeMeta:   metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
				ObjectMeta: meta,
			},
		},
		"a view passes through unchanged": {
			in:   &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			want: &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := sandboxView(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("view (-want +got):\n%s", diff)
			}
		})
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
	if _, err := c.syncTask(f.ctx, key(tk)); err != nil {
		t.Fatal(err)
	}
	// The informer has not brought the pinned task yet: the cache holds it
	// unpinned, as seeded. The children's events arrive now.
	cached, err := c.tasks.CalibanTasks(tk.Namespace).Get(tk.Name)
	if err != nil || cached.Status.ResolvedWorkspace != nil {
		t.Fatalf("the task cache should still hold the unpinned task: %v", err)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies(tk.Namespace).Get(f.ctx, builders.NetworkPolicyName(tk.Name), metaGet)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.viewOf(np)
	if err != nil {
		t.Fatal(err)
	}
	if v.(*childView).Holds == "" {
		t.Error("the NetworkPolicy the sync just applied was not found to hold what its task wants")
	}

	// A task the caches know nothing of vouches for nothing.
	other := np.DeepCopy()
	other.OwnerReferences[0].UID = "someone-else"
	v, err = c.viewOf(other)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*childView).Holds; got != "" {
		t.Errorf("a child of an unknown task holds %q", got)
	}
}

func TestChildHashesAreRenderedOncePerTaskVersion(t *testing.T) {
	f := newFixture(t)
	c := f.taskController()
	pinned := task(func(t *calibanv1alpha1.CalibanTask) {
		t.Status.ResolvedWorkspace = &calibanv1alpha1.ResolvedWorkspace{}
	})
	first, _, err := c.desiredHashes(pinned, pinned.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	// Same resourceVersion: the memo answers, whatever the object says
	// (a real task cannot change without a new resourceVersion).
	same := pinned.DeepCopy()
	same.Labels = map[string]string{"changed": "yes"}
	again, rendered, err := c.desiredHashes(same, same.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || rendered != nil {
		t.Errorf("the same task version rendered again: %+v, then %+v", first, again)
	}
	// A new version is rendered anew.
	edited := same.DeepCopy()
	edited.ResourceVersion = "2"
	edited.Status.ResolvedWorkspace.Env = []calibanv1alpha1.EnvVar{{Name: "MODE", Value: "fast"}}
	next, _, err := c.desiredHashes(edited, edited.Status.ResolvedWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if next.sandbox == first.sandbox || next.resourceVersion != "2" {
		t.Errorf("a new task version kept the old hashes: %+v", next)
	}
	// Another pin than the task's own is never memoized.
	other := &calibanv1alpha1.ResolvedWorkspace{}
	if _, _, err := c.desiredHashes(edited, other); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.hashes.get(edited); got != next {
		t.Errorf("a foreign pin replaced the memo: %+v", got)
	}
}
