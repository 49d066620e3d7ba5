// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	extv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/extensions/v1beta1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
	sandboxclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/operator/codec"
)

// The clients for custom resources: the operator's own (through the
// generated clientset), agent-sandbox's extensions (the same clientset over
// a REST client of their group) and agent-sandbox's Sandboxes, which the operator
// reads into its own Go view of the type (pkg/apis/sandbox) and writes as
// that view's generated apply configuration. Both speak JSON through the
// codec package's decoder; the Sandbox informer is built here because no
// informer is generated for a type the operator does not own (ADR 0009).

var sandboxScheme = newSandboxScheme()

func newSandboxScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// ListOptions and friends, for the query parameters of list and watch.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := sandboxv1beta1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("registering the Sandbox types: %v", err)) // static input: a programming error
	}
	return s
}

var sandboxParameterCodec = runtime.NewParameterCodec(sandboxScheme)

// NewSandboxRESTClient is a REST client for agent-sandbox's Sandbox API
// (agents.x-k8s.io/v1beta1): the Sandbox informer lists and watches
// through it, and sandboxClient gets and applies through it.
func NewSandboxRESTClient(base *rest.Config) (rest.Interface, error) {
	return customResourceClient(base, sandboxv1beta1.SchemeGroupVersion, sandboxScheme)
}

// NewCalibanClient is the generated clientset for the operator's own
// resources, over a REST client whose JSON decoding skips the extra pass
// client-go makes to learn each object's kind (package codec).
func NewCalibanClient(base *rest.Config) (calibanclient.Interface, error) {
	rc, err := customResourceClient(base, calibanv1alpha1.SchemeGroupVersion, calibanscheme.Scheme)
	if err != nil {
		return nil, err
	}
	return calibanclient.New(rc), nil
}

// NewExtensionsClient is the generated clientset over a REST client for
// agent-sandbox's extensions API (extensions.agents.x-k8s.io/v1beta1): only
// its ExtensionsV1beta1 works, the other groups' clients would talk to the
// extensions group.
func NewExtensionsClient(base *rest.Config) (calibanclient.Interface, error) {
	rc, err := customResourceClient(base, extv1beta1.SchemeGroupVersion, calibanscheme.Scheme)
	if err != nil {
		return nil, err
	}
	return calibanclient.New(rc), nil
}

// customResourceClient is a REST client for one group version of custom
// resources, which speak JSON alone, decoded with the codec package's
// shortcuts.
func customResourceClient(base *rest.Config, gv schema.GroupVersion, scheme *runtime.Scheme) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = codec.JSON(scheme)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(cfg)
}

// NewSandboxInformer is a shared informer of the Sandboxes in namespace (all
// when empty) that tweak selects, decoded into the typed view.
func NewSandboxInformer(client rest.Interface, namespace string, resync time.Duration, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(sandboxListWatch(client, namespace, tweak), &sandboxv1beta1.Sandbox{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// NewClaimedSandboxInformer keeps the metadata of the Sandboxes that carry
// agent-sandbox's claim label (builders.LabelClaimUID), whoever labelled
// them otherwise, indexed by their controller's UID (controllerIndex).
// Only metadata is kept: a pod template per Sandbox would cost the memory
// the children's cache saves.
func NewClaimedSandboxInformer(client rest.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(sandboxListWatch(client, namespace, func(o *metav1.ListOptions) { o.LabelSelector = builders.LabelClaimUID }),
		&sandboxv1beta1.Sandbox{}, resync, cache.Indexers{controllerIndex: indexByController})
	// Set before the informer runs, so it cannot fail.
	_ = inf.SetTransform(metadataOnly)
	return inf
}

// controllerIndex indexes objects by the UID of their controller.
const controllerIndex = "controller-uid"

func indexByController(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if uid := controllerUID(m); uid != "" {
		return []string{string(uid)}, nil
	}
	return nil, nil
}

// metadataOnly keeps a Sandbox's object metadata, less its managed
// fields.
func metadataOnly(obj any) (any, error) {
	sb, ok := obj.(*sandboxv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	kept := &sandboxv1beta1.Sandbox{ObjectMeta: sb.ObjectMeta}
	kept.ManagedFields = nil
	return kept, nil
}

func sandboxListWatch(client rest.Interface, namespace string, tweak func(*metav1.ListOptions)) *cache.ListWatch {
	request := func(opts metav1.ListOptions) *rest.Request {
		tweak(&opts)
		return client.Get().Namespace(namespace).Resource(builders.SandboxResource).VersionedParams(&opts, sandboxParameterCodec)
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &sandboxv1beta1.SandboxList{}
			return list, request(opts).Do(ctx).Into(list)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return request(opts).Watch(ctx)
		},
	}
}

// sandboxClient is the generated typed client of the Sandbox view over
// rc, a client NewSandboxRESTClient made. (The generated clientset's own
// AgentsV1beta1 would talk to the caliban group's REST client.)
func sandboxClient(rc rest.Interface) *sandboxclient.AgentsV1beta1Client {
	return sandboxclient.New(rc)
}
