// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
	calibaninformers "github.com/caliban-ai/caliban-operator/pkg/generated/informers/externalversions"
	"github.com/caliban-ai/caliban-operator/pkg/operator"
)

// The bare client is the floor the operator's CPU per task is read
// against. Over the same transport and codecs as the operator (protobuf for
// built-in kinds, the operator's JSON decoding for custom resources, no
// compression, no client-side limit) it watches the same four kinds and
// sends, for each new task in its namespace, the writes the operator sends:
// the pin with Provisioning, the ServiceAccount, the NetworkPolicy and the
// Sandbox, then Running and one Event once the Sandbox is Ready. It renders
// with the operator's builders and decodes no answer. It keeps none of what
// makes the operator correct: no queue, no retries, no admission, no check
// of a child against its task, no leader election, no metrics. What it
// costs per task is what any client of this API pays on this machine for
// those requests and watch events; the operator's excess over it is the
// most its own code could still save. A Running write waits for no worker:
// it is sent as soon as the event that makes it due arrives, so its
// latency is the floor of Sandbox Ready → Running too.

type floorClient struct {
	namespace string
	settings  config.AgentSettings
	kube      kubernetes.Interface
	tasksREST rest.Interface
	sandboxes rest.Interface

	tasks      cache.Indexer
	workspaces cache.Indexer
	sbStore    cache.Store

	work chan string // tasks to pin and provision
	errs chan error
	// ran holds the tasks whose Running write was sent: a Sandbox that
	// turns Ready is reported by more than one event.
	ran sync.Map
}

// RunFloor runs the bare client against the cluster of kubeconfig, acting on
// the tasks of namespace, until ctx is done. It writes "synced" to ready once
// its caches have synced.
func RunFloor(ctx context.Context, kubeconfig, namespace string, ready io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// The operator's defaults: no client-side limit, no compression.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.DisableCompression = true
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return err
	}
	cal, err := operator.NewCalibanClient(cfg)
	if err != nil {
		return err
	}
	sandboxes, err := operator.NewSandboxRESTClient(cfg)
	if err != nil {
		return err
	}
	f := &floorClient{
		namespace: namespace, settings: config.DefaultAgentSettings(),
		kube: kube, tasksREST: cal.CalibanV1alpha1().RESTClient(), sandboxes: sandboxes,
		work: make(chan string, 1024), errs: make(chan error, 1),
	}

	ownedOnly := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{builders.LabelManagedBy: builders.FieldManager}.String()
	}
	calFactory := calibaninformers.NewSharedInformerFactory(cal, 0)
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(ownedOnly))
	taskInf := calFactory.Caliban().V1alpha1().CalibanTasks().Informer()
	wsInf := calFactory.Caliban().V1alpha1().Workspaces().Informer()
	sbInf := operator.NewSandboxInformer(sandboxes, "", 0, ownedOnly)
	// Watched as the operator watches them; the bare client never reads them.
	saInf := kubeFactory.Core().V1().ServiceAccounts().Informer()
	npInf := kubeFactory.Networking().V1().NetworkPolicies().Informer()
	f.tasks, f.workspaces, f.sbStore = taskInf.GetIndexer(), wsInf.GetIndexer(), sbInf.GetStore()

	onTask := func(obj any) {
		t, ok := obj.(*calibanv1alpha1.CalibanTask)
		if !ok || t.Namespace != namespace {
			return
		}
		switch t.Status.Phase {
		case "":
			f.work <- t.Namespace + "/" + t.Name
		case calibanv1alpha1.TaskProvisioning:
			// The Sandbox may have turned Ready before the pin reached
			// the cache.
			if sb, ok, _ := f.sbStore.GetByKey(t.Namespace + "/" + builders.SandboxName(t.Name)); ok && builders.SandboxServing(&sb.(*sandboxv1beta1.Sandbox).Status) {
				f.goRunning(ctx, t.Namespace+"/"+t.Name)
			}
		}
	}
	onSandbox := func(obj any) {
		sb, ok := obj.(*sandboxv1beta1.Sandbox)
		if !ok || sb.Namespace != namespace || !builders.SandboxServing(&sb.Status) {
			return
		}
		if owner := metav1.GetControllerOf(sb); owner != nil {
			f.goRunning(ctx, sb.Namespace+"/"+owner.Name)
		}
	}
	if _, err := taskInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onTask, UpdateFunc: func(_, obj any) { onTask(obj) },
	}); err != nil {
		return err
	}
	if _, err := sbInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onSandbox, UpdateFunc: func(_, obj any) { onSandbox(obj) },
	}); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{saInf, npInf} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			return err
		}
	}

	calFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	go sbInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), taskInf.HasSynced, wsInf.HasSynced, sbInf.HasSynced, saInf.HasSynced, npInf.HasSynced) {
		return context.Cause(ctx)
	}
	if _, err := io.WriteString(ready, "synced\n"); err != nil {
		return err
	}

	// As many pins in flight as the operator's default workers.
	var wg sync.WaitGroup
	for range config.DefaultProcessSettings().Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-f.work:
					if err := f.provision(ctx, key); err != nil {
						f.fail(err)
						return
					}
				}
			}
		})
	}
	select {
	case <-ctx.Done():
		wg.Wait()
		return nil
	case err := <-f.errs:
		return err
	}
}

func (f *floorClient) fail(err error) {
	select {
	case f.errs <- err:
	default:
	}
}

// goRunning writes Running for the task of key, now.
func (f *floorClient) goRunning(ctx context.Context, key string) {
	go func() {
		if err := f.running(ctx, key); err != nil && ctx.Err() == nil {
			f.fail(err)
		}
	}()
}

func (f *floorClient) task(key string) (*calibanv1alpha1.CalibanTask, error) {
	obj, ok, err := f.tasks.GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	return obj.(*calibanv1alpha1.CalibanTask), nil
}

// provision pins the task and applies its three children.
func (f *floorClient) provision(ctx context.Context, key string) error {
	task, err := f.task(key)
	if err != nil || task == nil {
		return err
	}
	wsObj, ok, err := f.workspaces.GetByKey(task.Namespace + "/" + task.Spec.WorkspaceRef.Name)
	if err != nil || !ok {
		return fmt.Errorf("the bare client found no Workspace for %s/%s (%v)", task.Namespace, task.Name, err)
	}
	ws := wsObj.(*calibanv1alpha1.Workspace)
	provider, msg := builders.ResolveProvider(&ws.Spec, task.Spec.ProviderRef)
	if msg != "" {
		return fmt.Errorf("the bare client cannot pin %s/%s: %s", task.Namespace, task.Name, msg)
	}
	pin := builders.PinWorkspace(task, &ws.Spec, provider)
	status := builders.TaskStatus(builders.TaskStatusInput{
		Task: task, Pin: pin, Posture: builders.RequestedPosture(task), Now: metav1.Now(),
		PinSignature: builders.SignPin(floorPinKey.Key, task.UID, pin, calibanv1alpha1.LaunchCold),
	}, f.settings)
	if err := f.applyStatus(ctx, task, status); err != nil {
		return err
	}
	if err := f.applyBuiltin(ctx, "serviceaccounts", builders.ServiceAccountName(task.Name), task.Namespace,
		builders.BuildServiceAccount(task)); err != nil {
		return err
	}
	if err := f.applyBuiltin(ctx, "networkpolicies", builders.NetworkPolicyName(task.Name), task.Namespace,
		builders.BuildNetworkPolicy(task, pin, f.settings)); err != nil {
		return err
	}
	body, err := json.Marshal(builders.BuildSandbox(task, pin, f.settings))
	if err != nil {
		return err
	}
	return f.sandboxes.Patch(types.ApplyPatchType).Namespace(task.Namespace).Resource(builders.SandboxResource).
		Name(builders.SandboxName(task.Name)).Param("fieldManager", builders.FieldManager).Param("force", "true").
		Body(body).Do(ctx).Error()
}

// floorPinKey signs the bare client's pins as the operator's key signs its
// own.
var floorPinKey = builders.PinKey{Key: []byte("the bare client's pin key: 32 B.")}

// running writes Running and its Event, once per task.
func (f *floorClient) running(ctx context.Context, key string) error {
	task, err := f.task(key)
	if err != nil || task == nil {
		return err
	}
	if _, done := f.ran.LoadOrStore(task.UID, true); done || task.Status.ResolvedWorkspace == nil {
		if task.Status.ResolvedWorkspace == nil {
			f.ran.Delete(task.UID) // the pin is not cached yet; the Sandbox's next event retries
		}
		return nil
	}
	sbObj, ok, err := f.sbStore.GetByKey(task.Namespace + "/" + builders.SandboxName(task.Name))
	if err != nil || !ok {
		return err
	}
	sb := sbObj.(*sandboxv1beta1.Sandbox)
	// The operator checks the pin's signature on every pass; so does the
	// floor, to do the same work.
	if problem := builders.UntrustedPin(task, floorPinKey); problem != nil {
		return fmt.Errorf("the bare client's own pin of %s/%s: %s", task.Namespace, task.Name, problem.Message)
	}
	status := builders.TaskStatus(builders.TaskStatusInput{
		Task: task, Pin: task.Status.ResolvedWorkspace, Posture: task.Status.PermissionPosture, Sandbox: builders.ObserveSandbox(sb), Now: metav1.Now(),
		PinSignature: task.Status.PinSignature,
	}, f.settings)
	if err := f.applyStatus(ctx, task, status); err != nil {
		return err
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", task.Name, now.UnixNano()), Namespace: task.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: builders.FieldManager,
		ReportingInstance:   "bench-floor",
		Action:              "Reconcile",
		Reason:              operator.EventPhaseChanged,
		Regarding: corev1.ObjectReference{
			APIVersion: calibanv1alpha1.SchemeGroupVersion.String(), Kind: "CalibanTask",
			Namespace: task.Namespace, Name: task.Name, UID: task.UID, ResourceVersion: task.ResourceVersion,
		},
		Note: "Provisioning → Running",
		Type: corev1.EventTypeNormal,
	}
	_, err = f.kube.EventsV1().Events(task.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

func (f *floorClient) applyStatus(ctx context.Context, task *calibanv1alpha1.CalibanTask, status calibanv1alpha1.CalibanTaskStatus) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": calibanv1alpha1.SchemeGroupVersion.String(), "kind": "CalibanTask",
		"metadata": map[string]any{"name": task.Name, "namespace": task.Namespace},
		"status":   status,
	})
	if err != nil {
		return err
	}
	return f.tasksREST.Patch(types.ApplyPatchType).Namespace(task.Namespace).Resource("calibantasks").Name(task.Name).
		SubResource("status").VersionedParams(&floorApply, calibanscheme.ParameterCodec).Body(body).Do(ctx).Error()
}

// applyBuiltin applies a built-in kind's apply configuration as JSON, the
// only form server-side apply takes besides YAML.
func (f *floorClient) applyBuiltin(ctx context.Context, resource, name, namespace string, ac any) error {
	body, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	var client rest.Interface = f.kube.CoreV1().RESTClient()
	if resource == "networkpolicies" {
		client = f.kube.NetworkingV1().RESTClient()
	}
	return client.Patch(types.ApplyPatchType).Namespace(namespace).Resource(resource).Name(name).
		VersionedParams(&floorApply, kubescheme.ParameterCodec).Body(body).Do(ctx).Error()
}

var floorApply = metav1.PatchOptions{FieldManager: builders.FieldManager, Force: ptr.To(true)}
