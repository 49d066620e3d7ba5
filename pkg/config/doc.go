// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config is the operator's settings, read from the environment once
// at start-up (docs/deploying.md#configuration). They come in two halves
// that change for different reasons: ProcessSettings is how the operator
// process itself runs (leader election and lease timing, its identity, the
// metrics and pprof endpoints, workers, the API client, logging, tracing,
// the namespace it watches, the resync, the task drain timeout and the
// Secret of the key it signs pins with); AgentSettings is the contract of
// the agent pods, the only settings the renderers in pkg/builders read.
// Parse reads both and reports every problem at once, so a misconfigured
// operator refuses to start with the whole list rather than one variable
// at a time.
//
// The package knows nothing of tasks or rendering: pkg/builders imports it,
// never the reverse, so a renderer cannot come to depend on how the process
// runs.
package config
