package operator

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// childView is what the caches keep of a task's ServiceAccount,
// NetworkPolicy or Sandbox: identity, owner, and the verdict of the check
// that matters, taken once when the object arrived, instead of the object.
// A task has three children, each a few kilobytes when decoded (a Sandbox
// is a pod template), and the caches hold every one of them; the verdict is
// a string.
type childView struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Holds is the applied hash of the desired child this object was found
	// to carry in full (the annotation and every value, see holds) when it
	// was cached, against its task as the task cache held it then; "" when
	// it did not, or there was no pinned task to render it from. A sync
	// whose desired child has this hash has nothing to apply.
	Holds string
	// SandboxStatus is a Sandbox's status, which the task's status is
	// derived from; nil for the other kinds.
	SandboxStatus *sandboxv1beta1.SandboxStatus
	// OperatingMode is a Sandbox's spec.operatingMode. Holds leaves it
	// out: the mode follows the task's lifecycle (suspend, finish, the
	// deadline: the clock), the rest follows spec and pin, and only the
	// rest is hashed.
	OperatingMode sandboxv1beta1.OperatingMode
	// RenderedBy is the child's rendered-by annotation: which settings and
	// operator version rendered it ("" for a child of a version before the
	// annotation).
	RenderedBy string
	// CalibandPort is the control port of a Sandbox's caliband container,
	// where the task's endpoint is (0 when it has none).
	CalibandPort int32
}

// keptFrom reports that the child was rendered under other settings or by
// another operator version than fingerprint, so it is kept as it is.
func (v *childView) keptFrom(fingerprint string) bool { return v.RenderedBy != fingerprint }

func (v *childView) DeepCopyObject() runtime.Object {
	out := &childView{TypeMeta: v.TypeMeta, Holds: v.Holds, OperatingMode: v.OperatingMode, RenderedBy: v.RenderedBy, CalibandPort: v.CalibandPort}
	v.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if v.SandboxStatus != nil {
		out.SandboxStatus = v.SandboxStatus.DeepCopy()
	}
	return out
}

// sandbox is a Sandbox view as the status derivation reads it: its name,
// the operatingMode agent-sandbox accepted, caliband's port and the status.
func (v *childView) sandbox() *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: v.Namespace}}
	sb.Spec.OperatingMode = liveMode(v.OperatingMode)
	if v.CalibandPort != 0 {
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: builders.ContainerCaliband,
			Ports: []corev1.ContainerPort{{Name: builders.PortNameCaliband, ContainerPort: v.CalibandPort}}}}
	}
	if v.SandboxStatus != nil {
		sb.Status = *v.SandboxStatus
	}
	return sb
}

// renderedBy is the child's rendered-by annotation, sharing the
// fingerprint's string when it is the same: every child of a fleet carries
// the same few values, and the caches keep one copy of each.
func (c *TaskController) renderedBy(obj metav1.Object) string {
	v := obj.GetAnnotations()[AnnotationRenderedBy]
	if v == c.fingerprint {
		return c.fingerprint
	}
	return v
}

// compactMeta keeps of an object's metadata what the task controller reads:
// identity, owners, deletion. Labels and annotations were read by the check
// behind Holds.
func compactMeta(m metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(),
		OwnerReferences: m.GetOwnerReferences(), DeletionTimestamp: m.GetDeletionTimestamp(),
	}
}

// viewOf is the transform of the three child informers: it checks the full
// object against what its task wants now and keeps the view. It waits for
// the gate set by checkChildrenAfter, if any.
func (c *TaskController) viewOf(obj any) (any, error) {
	if c.childGate != nil {
		<-c.childGate
	}
	switch o := obj.(type) {
	case *childView:
		return o, nil
	case *corev1.ServiceAccount:
		v := &childView{ObjectMeta: compactMeta(o)}
		if task := c.ownerTask(o); task != nil {
			if want, hash, err := desiredServiceAccount(task, c.hashes.partial(task).serviceAccount); err == nil {
				c.hashes.record(task, func(h *childHashes) { h.serviceAccount = hash })
				if upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	case *networkingv1.NetworkPolicy:
		v := &childView{ObjectMeta: compactMeta(o), RenderedBy: c.renderedBy(o)}
		if task := c.ownerTask(o); task != nil {
			if want, hash, err := desiredNetworkPolicy(task, task.Status.ResolvedWorkspace, c.settings, c.fingerprint, c.hashes.partial(task).networkPolicy); err == nil {
				c.hashes.record(task, func(h *childHashes) { h.networkPolicy = hash })
				if upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	case *sandboxv1beta1.Sandbox:
		// A copy: a pointer into o would keep all of o, pod template and
		// all, alive for as long as the view.
		status := o.Status
		v := &childView{ObjectMeta: compactMeta(o), SandboxStatus: &status, OperatingMode: o.Spec.OperatingMode,
			RenderedBy: c.renderedBy(o), CalibandPort: builders.CalibandPortOf(&o.Spec.PodTemplate.Spec)}
		if task := c.ownerTask(o); task != nil {
			// Hashing the rendered Sandbox costs more than rendering it; the
			// hash is taken once per version of the task.
			if want, hash, err := desiredSandbox(task, task.Status.ResolvedWorkspace, c.settings, c.fingerprint, c.hashes.partial(task).sandbox); err == nil {
				c.hashes.record(task, func(h *childHashes) { h.sandbox = hash })
				// holds skips an apply configuration's kind, which a watch
				// decodes objects without.
				want.Spec.OperatingMode = nil // compared on its own, see OperatingMode
				if upToDate(o, want, hash) {
					v.Holds = hash
				}
			}
		}
		return v, nil
	}
	return obj, nil
}

// checkChildrenAfter makes the children's transform wait until gate is
// closed: the task cache must have synced before a child is checked against
// its task, or every child would be found wanting and applied again at
// start-up. Call it before the child informers start.
func (c *TaskController) checkChildrenAfter(gate <-chan struct{}) { c.childGate = gate }

// ownerTask is the pinned task that controls a child, or nil.
func (c *TaskController) ownerTask(child metav1.Object) *calibanv1alpha1.CalibanTask {
	if task := c.controllingTask(child); task != nil && task.Status.ResolvedWorkspace != nil {
		return task
	}
	return nil
}

// cachedView is a child's view from a store, or nil. A store filled without
// the transform (a unit test's) holds full objects, which are viewed here.
func (c *TaskController) cachedView(store cache.Store, namespace, name string) *childView {
	obj, exists, err := store.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	v, _ := c.viewOf(obj)
	view, _ := v.(*childView)
	return view
}

// childHashes are the applied hashes of a task's three desired children,
// for one resourceVersion of the task.
type childHashes struct {
	resourceVersion                        string
	serviceAccount, networkPolicy, sandbox string
}

// complete reports that all three hashes are known.
func (h childHashes) complete() bool {
	return h.serviceAccount != "" && h.networkPolicy != "" && h.sandbox != ""
}

// hashMemo remembers each task's childHashes: the children are a pure
// function of the task (spec and pin) and the settings, so while the task's
// resourceVersion stands a sync need not render them to know there is
// nothing to apply, which is every resync. The children's transform fills
// it kind by kind as their events arrive, so the first sync after a restart
// finds it complete.
type hashMemo struct {
	mu     sync.Mutex
	byTask map[types.UID]childHashes
}

// get returns the task's three hashes, if all are known for its
// resourceVersion.
func (m *hashMemo) get(task *calibanv1alpha1.CalibanTask) (childHashes, bool) {
	h := m.partial(task)
	return h, h.complete()
}

// partial returns what is known for the task's resourceVersion; a hash not
// known yet is "".
func (m *hashMemo) partial(task *calibanv1alpha1.CalibanTask) childHashes {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[task.UID]; ok && h.resourceVersion == task.ResourceVersion && task.ResourceVersion != "" {
		return h
	}
	return childHashes{}
}

// record sets some of the task's hashes for its resourceVersion, dropping
// what was known for an earlier one.
func (m *hashMemo) record(task *calibanv1alpha1.CalibanTask, set func(*childHashes)) {
	if task.ResourceVersion == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byTask == nil {
		m.byTask = map[types.UID]childHashes{}
	}
	h := m.byTask[task.UID]
	if h.resourceVersion != task.ResourceVersion {
		h = childHashes{resourceVersion: task.ResourceVersion}
	}
	set(&h)
	m.byTask[task.UID] = h
}

// carry keeps what is known for from for to, a later version of the same
// task that the operator's own status write made: a status write changes
// neither the spec (the generation stands) nor, once the task is pinned,
// the pin, which are all the children are rendered from. Without it every
// status write would have the next sync, and every child event after it,
// render and hash the children again.
func (m *hashMemo) carry(from, to *calibanv1alpha1.CalibanTask) {
	if from.UID != to.UID || from.Generation != to.Generation || to.ResourceVersion == "" ||
		from.Status.ResolvedWorkspace == nil || !apiequality.Semantic.DeepEqual(from.Status.ResolvedWorkspace, to.Status.ResolvedWorkspace) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.byTask[from.UID]; ok && h.resourceVersion == from.ResourceVersion && from.ResourceVersion != "" {
		h.resourceVersion = to.ResourceVersion
		m.byTask[from.UID] = h
	}
}

func (m *hashMemo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byTask, uid)
}

// desiredChildren are a task's three desired children, rendered and
// stamped, with their hashes.
type desiredChildren struct {
	serviceAccount *corev1ac.ServiceAccountApplyConfiguration
	networkPolicy  *networkingv1ac.NetworkPolicyApplyConfiguration
	sandbox        *sandboxac.SandboxApplyConfiguration
	hashes         childHashes
}

func (c *TaskController) renderChildren(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (*desiredChildren, error) {
	d := &desiredChildren{hashes: childHashes{resourceVersion: task.ResourceVersion}}
	var err error
	if d.serviceAccount, d.hashes.serviceAccount, err = desiredServiceAccount(task, ""); err != nil {
		return nil, err
	}
	if d.networkPolicy, d.hashes.networkPolicy, err = desiredNetworkPolicy(task, pin, c.settings, c.fingerprint, ""); err != nil {
		return nil, err
	}
	if d.sandbox, d.hashes.sandbox, err = desiredSandbox(task, pin, c.settings, c.fingerprint, ""); err != nil {
		return nil, err
	}
	return d, nil
}

// desiredHashes are the applied hashes of the children task wants under
// pin, from the memo when the task has not changed since they were taken.
// When they had to be rendered, the rendered children come too, so a sync
// that applies them does not render them twice; nil otherwise.
func (c *TaskController) desiredHashes(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace) (childHashes, *desiredChildren, error) {
	// The memo is keyed by the task alone: it serves only the task's own pin.
	memoized := pin == task.Status.ResolvedWorkspace
	if memoized {
		if h, ok := c.hashes.get(task); ok {
			return h, nil, nil
		}
	}
	d, err := c.renderChildren(task, pin)
	if err != nil {
		return childHashes{}, nil, err
	}
	if memoized {
		c.hashes.record(task, func(h *childHashes) { *h = d.hashes })
	}
	return d.hashes, d, nil
}

// The desired children, stamped with their applied hash: the sync applies
// them, the transform checks the cache against them, so both agree on what
// "up to date" means.

// desiredServiceAccount is the ServiceAccount task wants, stamped with its
// applied hash: known when the memo has it, taken otherwise.
func desiredServiceAccount(task *calibanv1alpha1.CalibanTask, known string) (*corev1ac.ServiceAccountApplyConfiguration, string, error) {
	sa := builders.BuildServiceAccount(task)
	hash, err := knownOrHash(known, sa)
	if err != nil {
		return nil, "", fmt.Errorf("rendering ServiceAccount %s: %w", *sa.Name, err)
	}
	return sa.WithAnnotations(map[string]string{AnnotationAppliedHash: hash}), hash, nil
}

// desiredNetworkPolicy is desiredServiceAccount for the NetworkPolicy,
// also stamped with the rendering's fingerprint.
func desiredNetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s builders.AgentSettings, fingerprint, known string) (*networkingv1ac.NetworkPolicyApplyConfiguration, string, error) {
	np := builders.BuildNetworkPolicy(task, pin, s)
	hash, err := knownOrHash(known, np)
	if err != nil {
		return nil, "", fmt.Errorf("rendering NetworkPolicy %s: %w", *np.Name, err)
	}
	return np.WithAnnotations(map[string]string{AnnotationAppliedHash: hash, AnnotationRenderedBy: fingerprint}), hash, nil
}

// knownOrHash is the applied hash of desired: known, when the memo had it.
func knownOrHash(known string, desired any) (string, error) {
	if known != "" {
		return known, nil
	}
	return appliedHash(desired)
}

// desiredSandbox is desiredNetworkPolicy for the Sandbox.
func desiredSandbox(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s builders.AgentSettings, fingerprint, known string) (*sandboxac.SandboxApplyConfiguration, string, error) {
	sb := builders.BuildSandbox(task, pin, s)
	hash, err := knownOrHash(known, sb)
	if err != nil {
		return nil, "", fmt.Errorf("rendering Sandbox %s: %w", *sb.Name, err)
	}
	return sb.WithAnnotations(map[string]string{AnnotationAppliedHash: hash, AnnotationRenderedBy: fingerprint}), hash, nil
}
