// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"

	calibanclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/caliban/v1alpha1"
	agentsclient "github.com/caliban-ai/caliban-operator/pkg/generated/clientset/versioned/typed/sandbox/v1beta1"
)

// Options are what every command shares: kubectl's connection flags, the
// streams, and a clock for ages.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams
	Now     func() time.Time
}

// NewOptions are the options of a run writing to streams, with kubectl's
// connection flags at their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Flags: genericclioptions.NewConfigFlags(true), Streams: streams, Now: time.Now}
}

// Clients are typed clients of only the API groups the plugin reads, not
// whole clientsets: each group's client brings its code into the binary,
// and a narrow interface is all a test has to fake.
type Clients struct {
	Caliban    calibanclient.CalibanV1alpha1Interface
	Agents     agentsclient.AgentsV1beta1Interface
	Core       corev1client.CoreV1Interface
	Networking networkingv1client.NetworkingV1Interface
	Events     eventsv1client.EventsV1Interface
}

// Clients connects as the connection flags say.
func (o *Options) Clients() (*Clients, error) {
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, WithCode(ExitError, err)
	}
	// The user agent goes into the shared transport, so it is set before
	// the transport is built, as a clientset sets it.
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	// One transport for every group, as one clientset shares one.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, WithCode(ExitError, err)
	}
	caliban, errCaliban := calibanclient.NewForConfigAndClient(cfg, hc)
	agents, errAgents := agentsclient.NewForConfigAndClient(cfg, hc)
	core, errCore := corev1client.NewForConfigAndClient(cfg, hc)
	networking, errNetworking := networkingv1client.NewForConfigAndClient(cfg, hc)
	events, errEvents := eventsv1client.NewForConfigAndClient(cfg, hc)
	if err := errors.Join(errCaliban, errAgents, errCore, errNetworking, errEvents); err != nil {
		return nil, WithCode(ExitError, err)
	}
	return &Clients{Caliban: caliban, Agents: agents, Core: core, Networking: networking, Events: events}, nil
}

// Namespace is the namespace the command acts in: -n, else the
// kubeconfig context's, else "default", as kubectl decides it.
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", WithCode(ExitError, err)
	}
	return ns, nil
}
