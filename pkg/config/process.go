// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ProcessSettings is how the operator process runs: leader election,
// identity, HTTP endpoints, queues, API client, logging, tracing, the
// namespace it watches and how often it looks at everything again. No
// renderer reads it.
type ProcessSettings struct {
	LeaderElection bool
	LeaseName      string
	LeaseNamespace string
	LeaseDuration  time.Duration
	// LeaseGrace is always shorter than LeaseDuration.
	LeaseGrace time.Duration
	// PodName is the lease identity; ControllerPodName the Event instance.
	PodName           string
	ControllerPodName string

	// MetricsBindAddress is "" when metrics are disabled ("0").
	MetricsBindAddress string
	// PprofBindAddress serves net/http/pprof; "" (the default) serves
	// nothing. Profiles reveal internals, so it is off unless asked for.
	PprofBindAddress string
	Workers          int
	KubeAPIQPS       float32
	KubeAPIBurst     int
	// KubeAPICompression lets the apiserver gzip its answers. Off by
	// default: the apiserver compresses a watch stream event by event, which
	// costs both ends CPU per event to save bandwidth the operator, next to
	// its apiserver, does not need (docs/adr/0009-performance-at-default-settings.md).
	KubeAPICompression bool
	LogVerbosity       int
	LogFormat          string
	// WatchNamespace is "" to watch every namespace.
	WatchNamespace string
	// ResyncPeriod is the informers' periodic resync: every object is
	// synced again that often, as a safety net behind the events.
	ResyncPeriod time.Duration
	// TaskDrainTimeout bounds how long a deleted task with
	// lifecycle.onDelete checkpoint waits for prospero to drain it.
	TaskDrainTimeout time.Duration
	// Tracing is where the syncs' spans go, if anywhere.
	Tracing TracingSettings
	// PinKeySecret names the Secret, in PinKeyNamespace(), that holds the
	// key the operator signs and checks task pins with.
	PinKeySecret string
}

// DefaultPinKeySecret is CALIBAN_PIN_KEY_SECRET's default.
const DefaultPinKeySecret = "caliban-pin-key"

// PinKeyNamespace is where the pin key Secret lives: the operator's own
// namespace (the lease namespace: CALIBAN_LEASE_NAMESPACE, else the pod's),
// and "default" only outside a cluster with neither, where a developer runs
// the binary against a test cluster.
func (s ProcessSettings) PinKeyNamespace() string {
	if s.LeaseNamespace != "" {
		return s.LeaseNamespace
	}
	return "default"
}

// NoClientRateLimit as the QPS turns client-go's client-side rate limiter
// off. It is the default: a burst of tasks should be queued and bounded by
// the apiserver's API Priority and Fairness (manifests/flowcontrol), not
// throttled in the operator while the server idles.
const NoClientRateLimit = -1

// DefaultTaskDrainTimeout is CALIBAN_DRAIN_TIMEOUT_SECONDS's default.
const DefaultTaskDrainTimeout = 600 * time.Second

// DefaultShutdownGrace is the shutdown grace where no lease sets one:
// without leader election no other replica waits for this one to stop, so
// it only keeps a stuck sync from holding the exit up.
const DefaultShutdownGrace = 10 * time.Second

// DefaultProcessSettings is the process configuration of an empty
// environment, except LeaseNamespace, which only parseProcessSettings can
// know.
func DefaultProcessSettings() ProcessSettings {
	return ProcessSettings{
		LeaderElection:     true,
		LeaseName:          "caliban-operator",
		LeaseDuration:      15 * time.Second,
		LeaseGrace:         5 * time.Second,
		PodName:            defaultPodName,
		MetricsBindAddress: ":8080",
		Workers:            32,
		KubeAPIQPS:         NoClientRateLimit,
		KubeAPIBurst:       100,
		LogVerbosity:       0,
		LogFormat:          LogFormatText,
		ResyncPeriod:       300 * time.Second,
		TaskDrainTimeout:   DefaultTaskDrainTimeout,
		Tracing:            DefaultTracingSettings(),
		PinKeySecret:       DefaultPinKeySecret,
	}
}

// RenewDeadline is how long a leader keeps trying to renew before it gives
// the lease up: the lease duration less the grace, so that a leader that
// lost the lease stops (within its shutdown grace, see ShutdownGrace) before
// a standby can take the lease over.
func (s ProcessSettings) RenewDeadline() time.Duration { return s.LeaseDuration - s.LeaseGrace }

// RetryPeriod is how often a candidate tries the lease and a leader renews
// it: half of the shorter of the grace and the renew deadline. Half of the
// renew deadline keeps it below the deadline divided by client-go's jitter
// factor (1.2) for every accepted duration and grace, so the elector never
// refuses what start-up accepted; half of the grace lets a renewal fail once
// and still land in time.
func (s ProcessSettings) RetryPeriod() time.Duration {
	return min(s.LeaseGrace, s.RenewDeadline()) / 2
}

// ShutdownGrace bounds how long the syncs in flight may run once the
// controllers stop. Under leader election a leader notices a lost lease at
// the latest a retry period plus the renew deadline after its last renewal,
// and a standby may take over a lease duration after it: the shutdown grace
// is what lies between, the lease grace less a retry period, so two writers
// never overlap.
func (s ProcessSettings) ShutdownGrace() time.Duration {
	if s.LeaderElection {
		return s.LeaseGrace - s.RetryPeriod()
	}
	return DefaultShutdownGrace
}

// parseProcessSettings reads the process variables alone, with Parse's
// rules. podNamespace is the service-account namespace the caller read from
// the pod's filesystem, "" outside a cluster; it is the lease namespace
// unless CALIBAN_LEASE_NAMESPACE says otherwise, and is then held to the same
// rule. On error the ProcessSettings is the zero value.
func parseProcessSettings(lookup func(string) (string, bool), podNamespace string) (ProcessSettings, error) {
	p := newEnvParser(lookup)
	s := p.process(podNamespace)
	if len(p.errs) > 0 {
		return ProcessSettings{}, errors.Join(p.errs...)
	}
	return s, nil
}

func (p *envParser) process(podNamespace string) ProcessSettings {
	s := DefaultProcessSettings()
	electionKnown := p.boolean(EnvLeaderElection, &s.LeaderElection)
	p.objectName(EnvLeaseName, &s.LeaseName)
	leaseNamespaceOK := p.leaseNamespace(strings.TrimSpace(podNamespace), &s.LeaseNamespace)
	if electionKnown && leaseNamespaceOK && s.LeaderElection && s.LeaseNamespace == "" {
		p.fail("%s is not set and there is no service-account namespace (not running in a cluster); set it, or disable leader election with %s=false",
			EnvLeaseNamespace, EnvLeaderElection)
	}
	durationOK := p.seconds(EnvLeaseDurationSeconds, &s.LeaseDuration)
	graceOK := p.seconds(EnvLeaseGraceSeconds, &s.LeaseGrace)
	if durationOK && graceOK && s.LeaseGrace >= s.LeaseDuration {
		p.fail("%s %d must be less than %s %d", EnvLeaseGraceSeconds, int64(s.LeaseGrace/time.Second),
			EnvLeaseDurationSeconds, int64(s.LeaseDuration/time.Second))
	}
	s.PodName = defaultPodName
	if v := p.optional(EnvPodName); v != "" {
		s.PodName = v
	} else if v := p.optional(EnvHostname); v != "" {
		s.PodName = v
	}
	s.ControllerPodName = p.optional(EnvControllerPodName)

	p.bindAddress(EnvMetricsBindAddress, &s.MetricsBindAddress)
	p.bindAddress(EnvPprofBindAddress, &s.PprofBindAddress)
	p.atLeast(EnvWorkers, 1, &s.Workers)
	p.qps(&s.KubeAPIQPS)
	p.atLeast(EnvKubeAPIBurst, 1, &s.KubeAPIBurst)
	p.boolean(EnvKubeAPICompression, &s.KubeAPICompression)
	p.atLeast(EnvLogVerbosity, 0, &s.LogVerbosity)
	p.logFormat(&s.LogFormat)
	p.namespace(EnvWatchNamespace, &s.WatchNamespace)
	p.seconds(EnvResyncSeconds, &s.ResyncPeriod)
	p.seconds(EnvDrainTimeoutSeconds, &s.TaskDrainTimeout)
	s.Tracing = p.tracing()
	p.objectName(EnvPinKeySecret, &s.PinKeySecret)
	return s
}

// leaseNamespace takes CALIBAN_LEASE_NAMESPACE, else the pod's namespace,
// which is checked too: it reaches the Lease API just the same.
func (p *envParser) leaseNamespace(podNamespace string, dst *string) bool {
	if p.optional(EnvLeaseNamespace) != "" {
		return p.namespace(EnvLeaseNamespace, dst)
	}
	if podNamespace != "" {
		if errs := validation.IsDNS1123Label(podNamespace); len(errs) > 0 {
			p.fail("%s is not set and the service-account namespace %q is not a valid namespace name: %s",
				EnvLeaseNamespace, podNamespace, strings.Join(errs, "; "))
			return false
		}
	}
	*dst = podNamespace
	return true
}

func (p *envParser) seconds(name string, dst *time.Duration) bool {
	v, found, ok := p.present(name)
	if !found {
		return ok
	}
	n, ok := p.integer(name, v, 64, 1, maxSeconds)
	if ok {
		*dst = time.Duration(n) * time.Second
	}
	return ok
}

// bindAddress accepts "0" (disabled) or host:port where host is empty, an
// IP address or a DNS name, and port is numeric: a named or zero port would
// bind somewhere nobody scrapes.
func (p *envParser) bindAddress(name string, dst *string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if v == "0" {
		*dst = ""
		return
	}
	host, port, err := net.SplitHostPort(v)
	valid := err == nil
	if valid {
		n, perr := strconv.Atoi(port)
		valid = perr == nil && n >= 1 && n <= 65535
	}
	if valid && host != "" {
		_, aerr := netip.ParseAddr(host)
		valid = aerr == nil || len(validation.IsDNS1123Subdomain(host)) == 0
	}
	if !valid {
		p.fail("%s %q is neither 0 (disabled) nor host:port with a port in 1-65535", name, v)
		return
	}
	*dst = v
}

// qps reads the client-side rate limit: a positive finite number, or
// NoClientRateLimit (-1) for none, as client-go reads a negative QPS.
func (p *envParser) qps(dst *float32) {
	v, found, _ := p.present(EnvKubeAPIQPS)
	if !found {
		return
	}
	f, err := strconv.ParseFloat(v, 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.fail("%s %q is not a number", EnvKubeAPIQPS, v)
		return
	}
	if err == nil && f == NoClientRateLimit {
		*dst = NoClientRateLimit
		return
	}
	// The negated comparison also refuses NaN, which ParseFloat accepts.
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		p.fail("%s %s must be -1 (no client-side limit) or a positive finite number", EnvKubeAPIQPS, v)
		return
	}
	*dst = float32(f)
}

func (p *envParser) logFormat(dst *string) {
	v, found, _ := p.present(EnvLogFormat)
	if !found {
		return
	}
	if v != LogFormatText && v != LogFormatJSON {
		p.fail("%s %q is not one of: %s, %s", EnvLogFormat, v, LogFormatText, LogFormatJSON)
		return
	}
	*dst = v
}

// atLeast reads an int that fits in 32 bits whatever the platform, so that
// a verbosity always converts to klog.Level and worker counts stay sane.
func (p *envParser) atLeast(name string, lo int64, dst *int) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if n, ok := p.integer(name, v, 32, lo, math.MaxInt32); ok {
		*dst = int(n)
	}
}
