package framework

import (
	"context"
	"errors"
	"path/filepath"
)

// Options change what StartWithOptions (and MainWithOptions) installs into
// a new cluster. The zero value is what Start installs.
type Options struct {
	// WithoutSandbox leaves agent-sandbox out: neither the test-only
	// Sandbox CRD (test/crds) nor the kwok Stages that play its controller
	// (test/stages) are installed, so the cluster does not serve
	// sandboxes.agents.x-k8s.io until InstallSandbox is called. The
	// caliban CRDs are installed as usual.
	WithoutSandbox bool
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
