package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
	sandboxv1beta1 "github.com/caliban-ai/caliban-operator/pkg/apis/sandbox/v1beta1"
	"github.com/caliban-ai/caliban-operator/pkg/builders"
	sandboxac "github.com/caliban-ai/caliban-operator/pkg/generated/applyconfiguration/sandbox/v1beta1"
	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned"
	calibanscheme "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/scheme"
)

// The Sandbox is agent-sandbox's type, not the operator's. A REST client
// that knows the operator's own Go view of it (pkg/apis/sandbox) reads list
// and watch answers straight into that view, and writes an apply (the
// view's generated apply configuration) without decoding the answer, which
// the generated clientset's Apply would decode. The dynamic client
// did the same work through unstructured maps: decoding JSON into maps,
// converting them by reflection, and decoding every apply's answer nobody
// read cost a seventh of the operator's CPU in a burst and a quarter in a
// cold start (ADR 0009).

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

// NewSandboxRESTClient is a client for agent-sandbox's Sandbox API
// (agents.x-k8s.io/v1beta1).
func NewSandboxRESTClient(base *rest.Config) (rest.Interface, error) {
	return customResourceClient(base, sandboxv1beta1.SchemeGroupVersion, sandboxScheme)
}

// NewCalibanClient is the generated clientset for the operator's own
// resources, over a REST client whose JSON decoding skips the extra pass
// client-go makes to learn each object's kind (codec.go).
func NewCalibanClient(base *rest.Config) (calibanclient.Interface, error) {
	rc, err := customResourceClient(base, calibanv1alpha1.SchemeGroupVersion, calibanscheme.Scheme)
	if err != nil {
		return nil, err
	}
	return calibanclient.New(rc), nil
}

// customResourceClient is a REST client for one group version of custom
// resources, which speak JSON alone, decoded with jsonCodecs.
func customResourceClient(base *rest.Config, gv schema.GroupVersion, scheme *runtime.Scheme) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = newJSONCodecs(scheme)
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

var sandboxApplyOptions = metav1.PatchOptions{FieldManager: builders.FieldManager, Force: ptr.To(true)}

// applySandbox server-side applies the desired Sandbox. The answer is not
// decoded: the Sandbox's watch brings it to the cache.
func (c *TaskController) applySandbox(ctx context.Context, desired *sandboxac.SandboxApplyConfiguration) error {
	body, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encoding Sandbox %s/%s: %w", *desired.Namespace, *desired.Name, err)
	}
	return c.sandboxClient.Patch(types.ApplyPatchType).
		Namespace(*desired.Namespace).Resource(builders.SandboxResource).Name(*desired.Name).
		VersionedParams(&sandboxApplyOptions, sandboxParameterCodec).
		Body(body).Do(ctx).Error()
}

// getSandbox reads one Sandbox from the server: the rare apply over an
// existing Sandbox needs what the cache's view does not keep (its spec).
func (c *TaskController) getSandbox(ctx context.Context, namespace, name string) (*sandboxv1beta1.Sandbox, error) {
	sb := &sandboxv1beta1.Sandbox{}
	err := c.sandboxClient.Get().Namespace(namespace).Resource(builders.SandboxResource).Name(name).Do(ctx).Into(sb)
	if err != nil {
		return nil, err
	}
	return sb, nil
}
