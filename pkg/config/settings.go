// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The operator's environment (docs/deploying.md#configuration). Nothing else
// in the code spells these names.
const (
	EnvCalibandImage         = "CALIBAND_IMAGE"
	EnvGitImage              = "CALIBAN_GIT_IMAGE"
	EnvWorkspaceRoot         = "CALIBAN_WORKSPACE_ROOT"
	EnvWorkspaceStorage      = "CALIBAN_WORKSPACE_STORAGE"
	EnvAgentUID              = "CALIBAN_AGENT_UID"
	EnvAgentGID              = "CALIBAN_AGENT_GID"
	EnvCalibandPort          = "CALIBAND_PORT"
	EnvAgentPortBase         = "CALIBAN_AGENT_PORT_BASE"
	EnvAgentPortEnd          = "CALIBAN_AGENT_PORT_END"
	EnvSessionTLSSecret      = "CALIBAN_SESSION_TLS_SECRET"
	EnvSessionTokenSecret    = "CALIBAN_SESSION_TOKEN_SECRET"
	EnvSessionTokenKey       = "CALIBAN_SESSION_TOKEN_KEY"
	EnvSessionServerName     = "CALIBAN_SESSION_SERVER_NAME"
	EnvCalibandCPURequest    = "CALIBAND_CPU_REQUEST"
	EnvCalibandMemoryRequest = "CALIBAND_MEMORY_REQUEST"
	EnvCalibandCPULimit      = "CALIBAND_CPU_LIMIT"
	EnvCalibandMemoryLimit   = "CALIBAND_MEMORY_LIMIT"
	EnvClusterDomain         = "CALIBAN_CLUSTER_DOMAIN"
	EnvIngressNamespace      = "CALIBAN_INGRESS_NAMESPACE"
	EnvIngressPodSelector    = "CALIBAN_INGRESS_POD_SELECTOR"
	EnvDNSNamespace          = "CALIBAN_DNS_NAMESPACE"
	EnvDNSPodSelector        = "CALIBAN_DNS_POD_SELECTOR"
	EnvLeaderElection        = "CALIBAN_LEADER_ELECTION"
	EnvLeaseName             = "CALIBAN_LEASE_NAME"
	EnvLeaseNamespace        = "CALIBAN_LEASE_NAMESPACE"
	EnvLeaseDurationSeconds  = "CALIBAN_LEASE_DURATION_SECONDS"
	EnvLeaseGraceSeconds     = "CALIBAN_LEASE_GRACE_SECONDS"
	EnvPodName               = "POD_NAME"
	EnvHostname              = "HOSTNAME"
	EnvControllerPodName     = "CONTROLLER_POD_NAME"
	EnvAgentSeccompProfile   = "CALIBAN_AGENT_SECCOMP_PROFILE"
	EnvMetricsBindAddress    = "CALIBAN_METRICS_BIND_ADDRESS"
	EnvWorkers               = "CALIBAN_WORKERS"
	EnvKubeAPIQPS            = "CALIBAN_KUBE_API_QPS"
	EnvKubeAPIBurst          = "CALIBAN_KUBE_API_BURST"
	EnvKubeAPICompression    = "CALIBAN_KUBE_API_COMPRESSION"
	EnvLogVerbosity          = "CALIBAN_LOG_VERBOSITY"
	EnvLogFormat             = "CALIBAN_LOG_FORMAT"
	EnvWatchNamespace        = "CALIBAN_WATCH_NAMESPACE"
	EnvResyncSeconds         = "CALIBAN_RESYNC_SECONDS"
	EnvPprofBindAddress      = "CALIBAN_PPROF_BIND_ADDRESS"
	EnvDrainTimeoutSeconds   = "CALIBAN_DRAIN_TIMEOUT_SECONDS"
	EnvPinKeySecret          = "CALIBAN_PIN_KEY_SECRET"
)

const (
	defaultPodName       = "caliban-operator"
	defaultClusterDomain = "cluster.local"
	// maxID is the API's ceiling for runAsUser/runAsGroup.
	maxID = math.MaxInt32
	// maxSeconds keeps a duration in seconds from overflowing time.Duration.
	maxSeconds = math.MaxInt64 / int64(time.Second)
)

// Log formats accepted in CALIBAN_LOG_FORMAT.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Settings is the operator's whole configuration, read once at start-up.
// It has two parts that change for different reasons: AgentSettings is the
// contract of the agent pods the operator renders (every renderer takes
// only that part), ProcessSettings is how the operator process itself runs.
// A Settings returned by Parse without error satisfies every rule Parse
// checks; code that builds one by hand (tests) starts from Default.
type Settings struct {
	AgentSettings
	ProcessSettings
}

// Default is the configuration of an empty environment inside a cluster,
// except LeaseNamespace, which only Parse can know.
func defaults() Settings {
	return Settings{AgentSettings: DefaultAgentSettings(), ProcessSettings: DefaultProcessSettings()}
}

// Parse reads every variable of the operator's environment (the table in
// docs/deploying.md#configuration) through lookup, which has os.LookupEnv's
// shape (a nil lookup reads an empty environment): the agent variables, then
// the process variables. podNamespace is the service-account namespace the
// caller read from the pod's filesystem, "" outside a cluster (see
// parseProcessSettings).
//
// Values are trimmed. An unset variable takes its default. A variable set to
// a blank value is an error, except where blank has a meaning of its own:
// the CALIBAND_*_REQUEST/_LIMIT variables (blank clears the entry),
// CALIBAN_CLUSTER_DOMAIN (blank keeps the default), CALIBAN_DNS_POD_SELECTOR
// (blank selects every pod of the DNS namespace), and the variables whose
// default is empty or derived (CALIBAN_INGRESS_NAMESPACE,
// CALIBAN_INGRESS_POD_SELECTOR, CALIBAN_LEASE_NAMESPACE, POD_NAME, HOSTNAME,
// CONTROLLER_POD_NAME, CALIBAN_WATCH_NAMESPACE), where blank is the same as
// unset. The OpenTelemetry variables (OTEL_*) follow their specification:
// blank is unset for all of them.
//
// Every problem is reported, not just the first: the error joins one error
// per problem (errors.Join), and each starts with the name of the variable
// at fault, except the empty-window error kept verbatim from the original
// operator, which names both window variables. On error the Settings is the
// zero value.
func Parse(lookup func(string) (string, bool), podNamespace string) (Settings, error) {
	p := newEnvParser(lookup)
	s := Settings{AgentSettings: p.agent(), ProcessSettings: p.process(podNamespace)}
	if len(p.errs) > 0 {
		return Settings{}, errors.Join(p.errs...)
	}
	return s, nil
}

// envParser reads variables and collects problems. Its readers leave the
// destination untouched (at its default) when the variable is unset or
// refused; those that return a bool report whether the destination is
// usable for a cross-variable check, so one bad value yields one problem.
type envParser struct {
	lookup func(string) (string, bool)
	errs   []error
}

func newEnvParser(lookup func(string) (string, bool)) *envParser {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return &envParser{lookup: lookup}
}

func (p *envParser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// get returns the trimmed value and whether the variable is set at all.
func (p *envParser) get(name string) (string, bool) {
	v, ok := p.lookup(name)
	return strings.TrimSpace(v), ok
}

// optional returns the trimmed value, "" when unset or blank.
func (p *envParser) optional(name string) string {
	v, _ := p.get(name)
	return v
}

// present reads a variable that must not be blank when set. found says
// there is a value to parse; ok is false only when the variable was refused
// (set but blank), so "unset" is (found=false, ok=true).
func (p *envParser) present(name string) (v string, found, ok bool) {
	v, set := p.get(name)
	switch {
	case !set:
		return "", false, true
	case v == "":
		p.fail("%s is set but blank", name)
		return "", false, false
	}
	return v, true, true
}

func (p *envParser) nonBlank(name string, dst *string) {
	if v, found, _ := p.present(name); found {
		*dst = v
	}
}

// Quantity texts are bounded before they reach ParseQuantity: inf.Dec
// rescales to a common exponent, so "1e-999999999" hangs ParseQuantity
// itself (rounding to nano) and "1e999999999" hangs the first Cmp or String.
// No real resource needs a long text or a large exponent.
const (
	maxQuantityLen      = 64
	maxQuantityExponent = 30
)

func (p *envParser) quantity(name, v string) (resource.Quantity, bool) {
	if quantityTooCostly(v) {
		p.fail("%s %q is out of range for a quantity (at most %d characters and an exponent within ±%d)",
			name, v, maxQuantityLen, maxQuantityExponent)
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		p.fail("%s %q is not a quantity (e.g. 10Gi, 500m)", name, v)
		return resource.Quantity{}, false
	}
	return q, true
}

func quantityTooCostly(v string) bool {
	if len(v) > maxQuantityLen {
		return true
	}
	i := strings.IndexAny(v, "eE")
	if i < 0 {
		return false
	}
	// "E" alone is the exa suffix and "Ei" the exbi one; only e<int> is an
	// exponent. Anything else ParseQuantity refuses cheaply.
	exp, err := strconv.Atoi(v[i+1:])
	if errors.Is(err, strconv.ErrRange) {
		return true
	}
	return err == nil && (exp > maxQuantityExponent || exp < -maxQuantityExponent)
}

// integer parses a decimal integer of the given bit size. An integer too
// large for it is reported as out of range, not as "not an integer": the
// user's intent was a number.
func (p *envParser) integer(name, v string, bits int, lo, hi int64) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.fail("%s %q is not an integer", name, v)
		return 0, false
	}
	if err != nil || n < lo || n > hi {
		p.fail("%s %s is outside %d-%d", name, v, lo, hi)
		return 0, false
	}
	return n, true
}

func (p *envParser) port(name string, dst *int32) bool {
	v, found, ok := p.present(name)
	if !found {
		return ok
	}
	n, ok := p.integer(name, v, 64, 1, 65535)
	if ok {
		*dst = int32(n)
	}
	return ok
}

// lookupSet reports whether the variable is set at all, blank or not.
func (p *envParser) lookupSet(name string) bool {
	_, ok := p.lookup(name)
	return ok
}

func (p *envParser) objectName(name string, dst *string) {
	p.dnsSubdomain(name, dst, "a valid object name")
}

// dnsSubdomain reads an optional RFC 1123 subdomain; what says what the
// value is for in the error.
func (p *envParser) dnsSubdomain(name string, dst *string, what string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		p.fail("%s %q is not %s: %s", name, v, what, strings.Join(errs, "; "))
		return
	}
	*dst = v
}

// namespace reads an optional namespace: blank or unset leaves dst alone.
func (p *envParser) namespace(name string, dst *string) bool {
	v := p.optional(name)
	if v == "" {
		return true
	}
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		p.fail("%s %q is not a valid namespace name: %s", name, v, strings.Join(errs, "; "))
		return false
	}
	*dst = v
	return true
}

// quoteInner escapes control characters and quotes the way %q does, without
// the surrounding double quotes, so a hostile value cannot break the
// one-problem-per-line shape of the joined error.
func quoteInner(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// boolean accepts caliban's own spellings (parse_bool_flag), case-insensitive.
func (p *envParser) boolean(name string, dst *bool) bool {
	v, found, ok := p.present(name)
	if !found {
		return ok
	}
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		*dst = true
	case "0", "false", "no", "off":
		*dst = false
	default:
		p.fail("%s %q is not a boolean; use true/false (or 1/0, yes/no, on/off)", name, v)
		return false
	}
	return true
}
