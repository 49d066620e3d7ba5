// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	extac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/extensions/v1beta1"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
)

// Keys agent-sandbox's extensions put on the Sandboxes and pods of a warm
// pool (docs/warm-start.md#what-agent-sandbox-does).
const (
	// LabelWarmPoolSandbox is on a pool's unclaimed Sandboxes and their
	// pods, and removed when a claim adopts one.
	LabelWarmPoolSandbox = "agents.x-k8s.io/warm-pool-sandbox"
	// LabelClaimUID is on a claimed Sandbox's pod: the claim's UID.
	LabelClaimUID = "agents.x-k8s.io/claim-uid"
	// LabelLaunchType is on a claim's Sandbox: warm when it came from the
	// pool, cold when the claim had to make it.
	LabelLaunchType = "agents.x-k8s.io/launch-type"
	// AnnotationSandboxTemplateRef is on every Sandbox made from a
	// template, by a pool or by a claim: the template's name. Adoption
	// keeps it.
	AnnotationSandboxTemplateRef = "agents.x-k8s.io/sandbox-template-ref"
	// LaunchTypeWarm is LabelLaunchType's value on a pool's Sandbox,
	// LaunchTypeCold on one a claim made.
	LaunchTypeWarm = "warm"
	LaunchTypeCold = "cold"
)

// LabelWarmPool marks every pod a Workspace's warm pool ever made, claimed
// or not, with the Workspace's label value: the pool's isolation policy
// selects them all. Claims rewrite a pod's template labels from the pool's
// current template, so only a label that no rendering changes can follow
// a pod for its whole life.
const LabelWarmPool = "caliban.caliban-ai.dev/warm-pool"

// EnvSandboxName carries the pod's name into a warm pod, whose Sandbox is
// named by the pool only once it exists: caliband's advertised host expands
// it, and the pod's name is its Sandbox's, as is the headless Service's.
const EnvSandboxName = "CALIBAN_SANDBOX_NAME"

const (
	warmPoolSuffix = "-warm"
	// warmPoolNameMax leaves room for the 5 characters agent-sandbox adds
	// to a pool's name for each of its Sandboxes, whose name must still be
	// a 63-character DNS-1035 label (it names the pod's Service).
	warmPoolNameMax      = safeNameMax - 6
	warmIsolationSuffix  = "-isolation"
	warmUnclaimedSuffix  = "-unclaimed"
	claimSuffix          = "-claim"
	warmRenderingHashLen = 10
)

// WarmPoolName is the name of a Workspace's SandboxWarmPool, and of its
// ServiceAccount: "<workspace>-warm" when that is a DNS-1035 label of at
// most 57 characters, else the safe form of SandboxName's rule cut to 57.
// It must never change: it names objects in clusters.
func WarmPoolName(workspace string) string {
	if plain := workspace + warmPoolSuffix; len(plain) <= warmPoolNameMax && len(validation.IsDNS1035Label(plain)) == 0 {
		return plain
	}
	return cutHashedName(workspace, warmPoolSuffix, warmPoolNameMax)
}

// WarmTemplateName is the name of the SandboxTemplate of one rendering of
// a Workspace's pool: the pool's name and the rendering's hash. A task whose
// pin renders to the same hash can take a Sandbox from the pool; one made
// from any other template name is not its rendering.
func WarmTemplateName(workspace, rendering string) string {
	return WarmPoolName(workspace) + "-" + rendering
}

// WarmIsolationPolicyName names the NetworkPolicy that isolates every pod
// of a Workspace's pool (BuildWarmIsolationPolicy).
func WarmIsolationPolicyName(workspace string) string {
	return WarmPoolName(workspace) + warmIsolationSuffix
}

// WarmUnclaimedPolicyName names the NetworkPolicy of a pool's unclaimed
// pods (BuildWarmUnclaimedPolicy).
func WarmUnclaimedPolicyName(workspace string) string {
	return WarmPoolName(workspace) + warmUnclaimedSuffix
}

// ClaimName is the name of a warm task's SandboxClaim: "<task>-claim" when
// that is a DNS-1035 label, else the safe form of SandboxName's rule. When
// the pool has no ready Sandbox the claim makes one named like itself, so
// it must be a name a Sandbox, a pod and a Service can have; it is not the
// task's Sandbox name, so a task that went warm and then cold never meets
// its old Sandbox under its new one's name.
func ClaimName(task string) string { return safeName(task, claimSuffix) }

// cutHashedName is hashedName with a lower limit than 63.
func cutHashedName(name, suffix string, max int) string {
	h := hashedName(name, suffix, true)
	if len(h) <= max {
		return h
	}
	// The hash and suffix are at the end; cut the prefix further.
	tail := h[len(h)-(1+nameHashLen+len(suffix)):]
	prefix := sanitizeName(name, true)
	if room := max - len(tail); len(prefix) > room {
		prefix = prefix[:room]
	}
	for len(prefix) > 0 && prefix[len(prefix)-1] == '-' {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + tail
}

// WarmPoolLabels are the labels of a Workspace's pool objects and of its
// pods. The task label is there with an empty value: no task's policy
// selects a pool pod, and every policy's "not an agent" rule (ADR 0022)
// still keeps a warm pod's agents from reaching another task's caliband.
func WarmPoolLabels(workspace string) map[string]string {
	return map[string]string{
		LabelManagedBy: FieldManager,
		LabelName:      "caliband",
		LabelTask:      "",
		LabelWarmPool:  TaskLabelValue(workspace),
	}
}

// WarmRendering is what a warm Sandbox is made from: the template's
// blueprint and the egress its unclaimed pod gets, and the hash of both,
// which names the template.
type WarmRendering struct {
	Blueprint *extac.SandboxTemplateSpecApplyConfiguration
	Egress    []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration
	Hash      string
}

// RenderWarm is the warm rendering of task under pin: the Sandbox the cold
// path would render (BuildSandbox) less what only a task's own Sandbox can
// carry (its name, ServiceAccount, labels and owner), with the pool's
// identity in their place. For the pool, task is the one a task with no
// spec of its own would be (PoolTask). Two renderings with one hash make
// the same pod: a task whose rendering's hash is the pool's runs exactly
// what a cold Sandbox would have run for it.
func RenderWarm(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings) (WarmRendering, error) {
	ws := task.Spec.WorkspaceRef.Name
	blueprint := extac.SandboxTemplateSpec().
		WithService(true).
		WithVolumeClaimTemplates(workspaceClaimTemplate(s)).
		WithPodTemplate(sandboxac.PodTemplate().
			WithMetadata(sandboxac.PodMetadata().WithLabels(WarmPoolLabels(ws))).
			WithSpec(podSpec(task, pin, s, warmIdentity(task.Namespace, ws, s))))
	egress := egressRules(pin.Egress, s)
	body, err := json.Marshal([]any{blueprint, egress})
	if err != nil {
		return WarmRendering{}, fmt.Errorf("hashing the warm rendering: %w", err)
	}
	sum := sha256.Sum256(body)
	return WarmRendering{Blueprint: blueprint, Egress: egress, Hash: hex.EncodeToString(sum[:])[:warmRenderingHashLen]}, nil
}

// warmIdentity is a pool pod's identity: the pool's ServiceAccount, and a
// host that expands to the pod's Sandbox's Service once the pool names it.
func warmIdentity(namespace, workspace string, s config.AgentSettings) podIdentity {
	var env envList
	env.fieldRef(EnvSandboxName, "metadata.name")
	return podIdentity{
		serviceAccount: WarmPoolName(workspace),
		advertiseHost:  fmt.Sprintf("$(%s).%s.svc.%s", EnvSandboxName, namespace, s.ClusterDomain),
		env:            env,
	}
}

// PoolTask is the task a Workspace's pool is rendered for: one that sets
// nothing of its own, admitted now.
func PoolTask(ws *calibanv1alpha1.Workspace) *calibanv1alpha1.CalibanTask {
	return &calibanv1alpha1.CalibanTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ws.Namespace},
		Spec:       calibanv1alpha1.CalibanTaskSpec{WorkspaceRef: calibanv1alpha1.WorkspaceReference{Name: ws.Name}},
	}
}

// PoolPin is the pin PoolTask would get under ws now; false when ws names
// no provider for a task without providerRef (validation fails it then).
func PoolPin(ws *calibanv1alpha1.Workspace) (*calibanv1alpha1.ResolvedWorkspace, bool) {
	provider, problem := ResolveProvider(&ws.Spec, "")
	if problem != "" {
		return nil, false
	}
	return PinWorkspace(PoolTask(ws), &ws.Spec, provider), true
}

// WarmReplicas is the pool size ws asks for; 0 is no pool.
func WarmReplicas(ws *calibanv1alpha1.Workspace) int32 {
	if ws.Spec.WarmPool == nil || ws.Spec.WarmPool.Replicas < 0 {
		return 0
	}
	return ws.Spec.WarmPool.Replicas
}

// WarmSourcesProblem says why a warm Sandbox could run other code than its
// task's pin names, or "". A pool clones its sources when it makes a
// Sandbox, perhaps long before a task claims it; a branch or tag may have
// moved since, and a task admitted later would then run an older commit
// than a cold start would have cloned. A full commit id names the same
// tree forever (docs/adr/0026-warm-start.md).
func WarmSourcesProblem(sources []calibanv1alpha1.Source) string {
	for i, src := range sources {
		if !IsCommitSHA(src.Ref) {
			return fmt.Sprintf("sources[%d] '%s': ref '%s' is not a full commit id; a warm Sandbox cloned earlier could hold an older commit than the ref names when its task starts, so only workspaces whose sources are all pinned to commits keep a warm pool",
				i, src.Name, src.Ref)
		}
	}
	return ""
}

// workspaceClaimTemplate is the workspace volume's claim template, the
// same for a task's Sandbox and a pool's.
func workspaceClaimTemplate(s config.AgentSettings) *sandboxac.PersistentVolumeClaimTemplateApplyConfiguration {
	return sandboxac.PersistentVolumeClaimTemplate().
		WithMetadata(sandboxac.EmbeddedObjectMetadata().WithName(VolumeWorkspace)).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().
			WithAccessModes(workspaceAccessModeRWO).
			WithResources(corev1ac.VolumeResourceRequirements().WithRequests(workspaceStorage(s))))
}

// BuildWarmTemplate is the SandboxTemplate of rendering r of ws's pool.
// agent-sandbox is told to leave the network alone: its managed policy
// would add its own allowances to the task's (policies only ever add) and
// point the pod's DNS away from the cluster. The operator's policies
// isolate the pool's pods instead.
func BuildWarmTemplate(ws *calibanv1alpha1.Workspace, r WarmRendering) *extac.SandboxTemplateApplyConfiguration {
	spec := *r.Blueprint
	spec.WithNetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged)
	return extac.SandboxTemplate(WarmTemplateName(ws.Name, r.Hash), ws.Namespace).
		WithLabels(WarmPoolLabels(ws.Name)).
		WithOwnerReferences(workspaceOwnerReference(ws)).
		WithSpec(&spec)
}

// BuildWarmPool is ws's SandboxWarmPool, serving template. Recreate: a
// pool that rolls to a new template deletes its unclaimed Sandboxes of
// the old one at once, and no claim takes one after (with OnReplenish a
// claim could still get a Sandbox of the old rendering). Claimed
// Sandboxes are never touched.
func BuildWarmPool(ws *calibanv1alpha1.Workspace, template string) *extac.SandboxWarmPoolApplyConfiguration {
	return extac.SandboxWarmPool(WarmPoolName(ws.Name), ws.Namespace).
		WithLabels(WarmPoolLabels(ws.Name)).
		WithOwnerReferences(workspaceOwnerReference(ws)).
		WithSpec(extac.SandboxWarmPoolSpec().
			WithReplicas(WarmReplicas(ws)).
			WithTemplateRef(extac.SandboxTemplateRef().WithName(template)).
			WithUpdateStrategy(extac.SandboxWarmPoolUpdateStrategy().WithType(extv1beta1.UpdateStrategyRecreate)))
}

// BuildWarmServiceAccount is the identity of ws's warm pods: like a task's,
// no token and no Role, so the pods have no API access.
func BuildWarmServiceAccount(ws *calibanv1alpha1.Workspace) *corev1ac.ServiceAccountApplyConfiguration {
	return corev1ac.ServiceAccount(WarmPoolName(ws.Name), ws.Namespace).
		WithLabels(WarmPoolLabels(ws.Name)).
		WithOwnerReferences(workspaceOwnerReference(ws)).
		WithAutomountServiceAccountToken(false)
}

// BuildWarmIsolationPolicy selects every pod ws's pool made, claimed or
// not, and allows nothing: alone it cuts the pod off, and the pool's or
// the task's policy opens exactly what the rendering allows. Between a
// claim's adoption relabelling the pod and the task's policy existing, it
// is what applies.
func BuildWarmIsolationPolicy(ws *calibanv1alpha1.Workspace) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(WarmIsolationPolicyName(ws.Name), ws.Namespace).
		WithLabels(WarmPoolLabels(ws.Name)).
		WithOwnerReferences(workspaceOwnerReference(ws)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelWarmPool: TaskLabelValue(ws.Name)})).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
}

// BuildWarmUnclaimedPolicy lets ws's unclaimed pool pods out as the
// current rendering allows (the clone needs its git servers) and nobody
// in: nothing talks to a caliband before its task exists. A pool pod of an
// older rendering, deleted by the pool as it rolls, briefly has the new
// allowance; it runs no agent.
func BuildWarmUnclaimedPolicy(ws *calibanv1alpha1.Workspace, r WarmRendering) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(WarmUnclaimedPolicyName(ws.Name), ws.Namespace).
		WithLabels(WarmPoolLabels(ws.Name)).
		WithOwnerReferences(workspaceOwnerReference(ws)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().
				WithMatchLabels(map[string]string{LabelWarmPool: TaskLabelValue(ws.Name)}).
				WithMatchExpressions(metav1ac.LabelSelectorRequirement().WithKey(LabelWarmPoolSandbox).WithOperator(metav1.LabelSelectorOpExists))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			WithEgress(r.Egress...))
}

// BuildClaim is a warm task's SandboxClaim on its Workspace's pool. It
// sets no env and no volume claim templates: either would send it past
// the pool to a cold Sandbox.
func BuildClaim(task *calibanv1alpha1.CalibanTask) *extac.SandboxClaimApplyConfiguration {
	return extac.SandboxClaim(ClaimName(task.Name), task.Namespace).
		WithLabels(TaskLabels(task)).
		WithOwnerReferences(ownerReference(task)).
		WithSpec(extac.SandboxClaimSpec().
			WithWarmPoolRef(extac.SandboxWarmPoolRef().WithName(WarmPoolName(task.Spec.WorkspaceRef.Name))))
}

// BuildWarmNetworkPolicy is a warm task's NetworkPolicy: the task's own
// rules for the pod its claim holds, selected by the claim's UID, which
// agent-sandbox puts on the pod when the claim adopts it.
func BuildWarmNetworkPolicy(task *calibanv1alpha1.CalibanTask, pin *calibanv1alpha1.ResolvedWorkspace, s config.AgentSettings, claimUID string) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkPolicy(task, pin, s, metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelClaimUID: claimUID}))
}

// BuildClaimedSandbox is what the operator applies to the Sandbox a warm
// task's claim holds: the task's labels, by which the operator's Sandbox
// cache finds it, and the operating mode the task's lifecycle asks for.
// The rest is the pool's and agent-sandbox's.
func BuildClaimedSandbox(task *calibanv1alpha1.CalibanTask, name string, mode sandboxv1beta1.OperatingMode) *sandboxac.SandboxApplyConfiguration {
	return sandboxac.Sandbox(name, task.Namespace).
		WithLabels(TaskLabels(task)).
		WithSpec(sandboxac.SandboxSpec().WithOperatingMode(mode))
}

// IsWarm reports that task claims its Sandbox from a warm pool.
func IsWarm(task *calibanv1alpha1.CalibanTask) bool {
	return task.Status.Launch != nil && task.Status.Launch.Type == calibanv1alpha1.LaunchWarm
}

func workspaceOwnerReference(ws *calibanv1alpha1.Workspace) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(calibanv1alpha1.SchemeGroupVersion.String()).
		WithKind("Workspace").
		WithName(ws.Name).
		WithUID(ws.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// TakeSandboxPatch is the JSON patch that makes a claimed Sandbox the
// task's: it first tests what makes it so (its controller is the task's
// claim, claimUID, and it was made from template, the task's rendering),
// then adds the task's labels and, with setMode, its operatingMode. A
// failed test changes nothing. The mode is left out when the Sandbox
// already has it: a new spec is a new generation, which agent-sandbox
// answers with a status write of its own.
func TakeSandboxPatch(task *calibanv1alpha1.CalibanTask, claimUID types.UID, template string, mode sandboxv1beta1.OperatingMode, setMode bool) ([]byte, error) {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": string(claimUID)},
		{"op": "test", "path": "/metadata/annotations/" + jsonPointerEscape(AnnotationSandboxTemplateRef), "value": template},
	}
	labels := TaskLabels(task)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + jsonPointerEscape(k), "value": labels[k]})
	}
	if setMode {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/operatingMode", "value": string(mode)})
	}
	return json.Marshal(ops)
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// DuplicateSandboxes are the Sandboxes among controlled, those a warm
// task's claim (claimUID) controls, that agent-sandbox made beside the one
// the claim's status names (named), and that serve no task: none is
// named by the claim, carries the task's UID label (taskUID: the task took
// it), or is being deleted. Nothing is a duplicate until the claim names
// a Sandbox it controls: before that, any of them may be the one it
// settles on. agent-sandbox v1.0.3 can adopt a pool Sandbox and then make
// one from the template for the same claim (docs/warm-start.md#duplicates).
func DuplicateSandboxes(claimUID types.UID, named string, taskUID types.UID, controlled []metav1.Object) []metav1.Object {
	holds := slices.ContainsFunc(controlled, func(o metav1.Object) bool {
		return o.GetName() == named && controlledBy(o, claimUID)
	})
	if named == "" || !holds {
		return nil
	}
	var dups []metav1.Object
	for _, o := range controlled {
		if o.GetName() == named || !controlledBy(o, claimUID) || o.GetLabels()[LabelTaskUID] == string(taskUID) || o.GetDeletionTimestamp() != nil {
			continue
		}
		dups = append(dups, o)
	}
	slices.SortFunc(dups, func(a, b metav1.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return dups
}

func controlledBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == uid
}

// ReasonDuplicateSandboxRemoved is the reason of the Warning Event on a
// warm task whose claim's duplicate Sandbox the operator deleted.
const ReasonDuplicateSandboxRemoved = "DuplicateSandboxRemoved"

// DuplicateRemovedNote is the note of the Warning Event that says a
// duplicate Sandbox of a warm task was removed.
func DuplicateRemovedNote(duplicate, claim, named string) string {
	return fmt.Sprintf("Sandbox '%s' was made for claim '%s' beside Sandbox '%s', which the task runs on; deleted it (an agent-sandbox adoption race, fixed upstream in v1.0.5)", duplicate, claim, named)
}

// PodReachable says whether pod, read by the name of a warm task's Sandbox
// (sandboxUID), is what the task's NetworkPolicy lets prospero reach: it
// carries the claim's UID label the policy selects by, the Sandbox is its
// controller, it is not being deleted, and it is Ready. It returns "" when
// it is, or why not, for the task's Ready message; a nil pod is one not
// made yet.
func PodReachable(pod *corev1.Pod, sandbox string, sandboxUID, claimUID types.UID) string {
	switch {
	case pod == nil:
		return fmt.Sprintf("Sandbox %s is ready; its pod is not there yet", sandbox)
	case !controlledBy(pod, sandboxUID) || pod.DeletionTimestamp != nil:
		return fmt.Sprintf("Sandbox %s is ready; pod %s is not its pod", sandbox, pod.Name)
	case pod.Labels[LabelClaimUID] != string(claimUID):
		return fmt.Sprintf("Sandbox %s is ready; waiting for agent-sandbox to give its pod the label %s=%s, which the task's NetworkPolicy selects", sandbox, LabelClaimUID, claimUID)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	return fmt.Sprintf("Sandbox %s is ready; its pod %s is not", sandbox, pod.Name)
}
