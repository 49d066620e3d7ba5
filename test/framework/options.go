// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Options change what StartWithOptions (and MainWithOptions) installs into
// a new cluster. The zero value is what Start installs.
type Options struct {
	// WithoutSandbox leaves agent-sandbox out: neither its Sandbox CRD
	// (test/crds) nor the kwok Stages that play its controller
	// (test/stages) are installed, so the cluster does not serve
	// sandboxes.agents.x-k8s.io until InstallSandbox is called. The
	// caliban CRDs are installed as usual.
	WithoutSandbox bool

	// WithoutCalibanCRDs leaves the caliban CRDs out, for a test that
	// installs them itself (the CRDs chart). Deleting them instead, right
	// after the cluster installed them, races the apiserver setting up
	// their storage: its CRD finalizer can then wait for good.
	WithoutCalibanCRDs bool

	// ImmediateSandbox makes the Sandbox stand-in write Ready as soon as
	// kwok sees a Sandbox, instead of after the sandbox-ready Stage's
	// delay (300 ms). A benchmark wants this: a delay would be the test
	// bed's latency, not the operator's. The ready-after annotation still
	// delays the Sandboxes that carry it.
	ImmediateSandbox bool

	// AuditOperator makes the apiserver write an audit log (AuditEvents
	// reads it) of every request the operator's ServiceAccount sends but
	// reads of single objects. With it, a test can tell which process wrote
	// what and when: each minted token has its own credential id.
	AuditOperator bool

	// RealAgentSandbox runs agent-sandbox's own controller (v1.0.3, built
	// by `make tools` from hack/tools/agent-sandbox), with its extensions
	// API (warm pools) and their CRDs, instead of the kwok Stages that play
	// it: it makes real Pods (Running and Ready on kwok
	// nodes), headless Services and PersistentVolumeClaims, which bind to
	// volumes the test provides (ProvideVolumes). Slower than the stand-in:
	// a Sandbox is Ready once its claim is bound and its pod scheduled.
	RealAgentSandbox bool
	// AgentSandboxArgs are more flags for agent-sandbox's controller, with
	// RealAgentSandbox: its tuning (e.g. the warm pool's replenish delay),
	// which the benchmark compares.
	AgentSandboxArgs []string
}

// sandboxReadyStage is the Stage in test/stages that makes a Sandbox Ready.
const sandboxReadyStage = "sandbox-ready"

// adjustStages changes the Stages read from test/stages as opts ask.
func (opts Options) adjustStages(stages []*unstructured.Unstructured) error {
	if !opts.ImmediateSandbox {
		return nil
	}
	for _, st := range stages {
		if st.GetName() != sandboxReadyStage {
			continue
		}
		return unstructured.SetNestedField(st.Object, int64(0), "spec", "delay", "durationMilliseconds")
	}
	return fmt.Errorf("test/stages has no Stage %s to make immediate", sandboxReadyStage)
}

// InstallSandbox installs what Options.WithoutSandbox left out, as Start
// would have: the Sandbox CRD (waiting until it is Established), then the
// kwok Stages once the apiserver publishes the Sandbox's OpenAPI v3 (see
// SyncStages). Calling it on a cluster that already has them re-applies
// them, which changes nothing but the Stages' sync annotation.
func (c *Cluster) InstallSandbox(ctx context.Context) error {
	if c.APIExt == nil {
		return errors.New("the cluster has no clients")
	}
	if err := c.InstallCRDs(ctx, filepath.Join(c.Root, "test", "crds")); err != nil {
		return err
	}
	return c.SyncStages(ctx)
}
