package builders

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The operator's environment (spec.md §6). Nothing else in the code spells
// these names.
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
	EnvLogVerbosity          = "CALIBAN_LOG_VERBOSITY"
	EnvLogFormat             = "CALIBAN_LOG_FORMAT"
	EnvWatchNamespace        = "CALIBAN_WATCH_NAMESPACE"
)

const (
	defaultPodName       = "caliban-operator"
	defaultClusterDomain = "cluster.local"
	// maxID is the API's ceiling for runAsUser/runAsGroup.
	maxID = math.MaxInt32
	// maxLeaseSeconds keeps a lease duration from overflowing time.Duration.
	maxLeaseSeconds = math.MaxInt64 / int64(time.Second)
)

// Log formats accepted in CALIBAN_LOG_FORMAT.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Settings is the operator's whole configuration, read once at start-up.
// A Settings returned by ParseSettings without error satisfies every rule
// ParseSettings checks; code that builds one by hand (tests) starts from
// DefaultSettings.
type Settings struct {
	CalibandImage string
	GitImage      string
	// WorkspaceRoot is absolute and cleaned: it is both the clone target
	// and caliband's --workspace-root.
	WorkspaceRoot    string
	WorkspaceStorage resource.Quantity
	AgentUID         int64
	AgentGID         int64

	CalibandPort  int32
	AgentPortBase int32
	// AgentPortEnd is inclusive. caliband has no end flag: it only bounds
	// the NetworkPolicy's port range.
	AgentPortEnd int32

	SessionTLSSecret   string
	SessionTokenSecret string
	SessionTokenKey    string
	SessionServerName  string

	// CalibandResources holds only the entries that are set; a map with no
	// entries is nil so the rendered container omits it.
	CalibandResources corev1.ResourceRequirements

	// ClusterDomain carries no trailing dot.
	ClusterDomain string
	// IngressNamespace is "" for the task's own namespace.
	IngressNamespace string
	// IngressPodSelector is nil when empty (every pod of the peer namespace).
	IngressPodSelector map[string]string

	LeaderElection bool
	LeaseName      string
	LeaseNamespace string
	LeaseDuration  time.Duration
	// LeaseGrace is always shorter than LeaseDuration.
	LeaseGrace time.Duration
	// PodName is the lease identity; ControllerPodName the Event instance.
	PodName           string
	ControllerPodName string

	AgentSeccompProfile corev1.SeccompProfileType

	// MetricsBindAddress is "" when metrics are disabled ("0").
	MetricsBindAddress string
	Workers            int
	KubeAPIQPS         float32
	KubeAPIBurst       int
	LogVerbosity       int
	LogFormat          string
	// WatchNamespace is "" to watch every namespace.
	WatchNamespace string
}

// DefaultSettings is the configuration of an empty environment inside a
// cluster, except LeaseNamespace, which only ParseSettings can know.
func DefaultSettings() Settings {
	return Settings{
		CalibandImage:      "ghcr.io/caliban-ai/caliban:latest",
		GitImage:           "alpine/git:latest",
		WorkspaceRoot:      "/work",
		WorkspaceStorage:   resource.MustParse("10Gi"),
		AgentUID:           10001,
		AgentGID:           10001,
		CalibandPort:       8443,
		AgentPortBase:      7100,
		AgentPortEnd:       7999,
		SessionTLSSecret:   "caliban-session-plane-tls",
		SessionTokenSecret: "caliban-session-plane-token",
		SessionTokenKey:    "token",
		SessionServerName:  "caliband",
		CalibandResources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("250m"),
				corev1.ResourceMemory: resource.MustParse("512Mi"),
			},
		},
		ClusterDomain:       defaultClusterDomain,
		LeaderElection:      true,
		LeaseName:           "caliban-operator",
		LeaseDuration:       15 * time.Second,
		LeaseGrace:          5 * time.Second,
		PodName:             defaultPodName,
		AgentSeccompProfile: corev1.SeccompProfileTypeRuntimeDefault,
		MetricsBindAddress:  ":8080",
		Workers:             4,
		KubeAPIQPS:          50,
		KubeAPIBurst:        100,
		LogVerbosity:        0,
		LogFormat:           LogFormatText,
	}
}

// ParseSettings reads every variable of spec.md §6 through lookup, which has
// os.LookupEnv's shape (a nil lookup reads an empty environment).
// podNamespace is the service-account namespace the caller read from the
// pod's filesystem, "" outside a cluster; it is the lease namespace unless
// CALIBAN_LEASE_NAMESPACE says otherwise, and is then held to the same rule.
//
// Values are trimmed. An unset variable takes its default. A variable set to
// a blank value is an error, except where blank has a meaning of its own:
// the CALIBAND_*_REQUEST/_LIMIT variables (blank clears the entry),
// CALIBAN_CLUSTER_DOMAIN (blank keeps the default), and the variables whose
// default is empty or derived (CALIBAN_INGRESS_NAMESPACE,
// CALIBAN_INGRESS_POD_SELECTOR, CALIBAN_LEASE_NAMESPACE, POD_NAME, HOSTNAME,
// CONTROLLER_POD_NAME, CALIBAN_WATCH_NAMESPACE), where blank is the same as
// unset.
//
// Every problem is reported, not just the first: the error joins one error
// per problem (errors.Join), and each starts with the name of the variable
// at fault, except the empty-window error kept verbatim from the original
// operator, which names both window variables. On error the Settings is the
// zero value.
func ParseSettings(lookup func(string) (string, bool), podNamespace string) (Settings, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	p := &envParser{lookup: lookup}
	s := DefaultSettings()

	p.nonBlank(EnvCalibandImage, &s.CalibandImage)
	p.nonBlank(EnvGitImage, &s.GitImage)
	p.workspaceRoot(&s.WorkspaceRoot)
	p.positiveQuantity(EnvWorkspaceStorage, &s.WorkspaceStorage)
	p.id(EnvAgentUID, &s.AgentUID)
	p.id(EnvAgentGID, &s.AgentGID)
	p.ports(&s)

	p.objectName(EnvSessionTLSSecret, &s.SessionTLSSecret)
	p.objectName(EnvSessionTokenSecret, &s.SessionTokenSecret)
	p.secretKey(EnvSessionTokenKey, &s.SessionTokenKey)
	p.serverName(EnvSessionServerName, &s.SessionServerName)
	p.resources(&s.CalibandResources)

	p.clusterDomain(&s.ClusterDomain)
	p.namespace(EnvIngressNamespace, &s.IngressNamespace)
	p.podSelector(&s.IngressPodSelector)

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

	p.seccompProfile(&s.AgentSeccompProfile)
	p.metricsAddress(&s.MetricsBindAddress)
	p.atLeast(EnvWorkers, 1, &s.Workers)
	p.qps(&s.KubeAPIQPS)
	p.atLeast(EnvKubeAPIBurst, 1, &s.KubeAPIBurst)
	p.atLeast(EnvLogVerbosity, 0, &s.LogVerbosity)
	p.logFormat(&s.LogFormat)
	p.namespace(EnvWatchNamespace, &s.WatchNamespace)

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

func (p *envParser) workspaceRoot(dst *string) {
	v, found, _ := p.present(EnvWorkspaceRoot)
	if !found {
		return
	}
	if !path.IsAbs(v) {
		p.fail("%s %q is not an absolute path", EnvWorkspaceRoot, v)
		return
	}
	*dst = path.Clean(v)
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

func (p *envParser) positiveQuantity(name string, dst *resource.Quantity) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	q, ok := p.quantity(name, v)
	if !ok {
		return
	}
	if q.Sign() <= 0 {
		p.fail("%s %q must be positive", name, v)
		return
	}
	*dst = q
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

func (p *envParser) id(name string, dst *int64) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if n, ok := p.integer(name, v, 64, 1, maxID); ok {
		*dst = n
	}
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

// ports checks the window rules only on ports that are individually valid,
// so a typo in one is reported once, not also as a window problem.
func (p *envParser) ports(s *Settings) {
	portOK := p.port(EnvCalibandPort, &s.CalibandPort)
	baseOK := p.port(EnvAgentPortBase, &s.AgentPortBase)
	endOK := p.port(EnvAgentPortEnd, &s.AgentPortEnd)
	if !baseOK || !endOK {
		return
	}
	if s.AgentPortBase > s.AgentPortEnd {
		p.fail("agent port window is empty: %s %d > %s %d", EnvAgentPortBase, s.AgentPortBase, EnvAgentPortEnd, s.AgentPortEnd)
		return
	}
	if portOK && s.CalibandPort >= s.AgentPortBase && s.CalibandPort <= s.AgentPortEnd {
		p.fail("%s %d falls inside the agent port window %d-%d", EnvCalibandPort, s.CalibandPort, s.AgentPortBase, s.AgentPortEnd)
	}
}

func (p *envParser) objectName(name string, dst *string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		p.fail("%s %q is not a valid object name: %s", name, v, strings.Join(errs, "; "))
		return
	}
	*dst = v
}

func (p *envParser) secretKey(name string, dst *string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if errs := validation.IsConfigMapKey(v); len(errs) > 0 {
		p.fail("%s %q is not a valid Secret key: %s", name, v, strings.Join(errs, "; "))
		return
	}
	*dst = v
}

// serverName must be a DNS name because caliband compares it with the
// serving certificate's SANs; anything else can never verify.
func (p *envParser) serverName(name string, dst *string) {
	v, found, _ := p.present(name)
	if !found {
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		p.fail("%s %q is not a DNS name: %s", name, v, strings.Join(errs, "; "))
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

// resourceVars pairs each request with its limit.
var resourceVars = []struct {
	request, limit string
	resource       corev1.ResourceName
}{
	{EnvCalibandCPURequest, EnvCalibandCPULimit, corev1.ResourceCPU},
	{EnvCalibandMemoryRequest, EnvCalibandMemoryLimit, corev1.ResourceMemory},
}

func (p *envParser) resources(dst *corev1.ResourceRequirements) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	maps.Copy(requests, dst.Requests)
	maps.Copy(limits, dst.Limits)
	// Requests first, then limits: the order of spec.md's table.
	ok := map[string]bool{}
	for _, rv := range resourceVars {
		ok[rv.request] = p.resource(rv.request, rv.resource, requests)
	}
	for _, rv := range resourceVars {
		ok[rv.limit] = p.resource(rv.limit, rv.resource, limits)
	}
	for _, rv := range resourceVars {
		req, hasReq := requests[rv.resource]
		lim, hasLim := limits[rv.resource]
		if ok[rv.request] && ok[rv.limit] && hasReq && hasLim && req.Cmp(lim) > 0 {
			note := ""
			if !p.lookupSet(rv.request) {
				note = " (the default)"
			}
			p.fail("%s %s%s is greater than %s %s", rv.request, req.String(), note, rv.limit, lim.String())
		}
	}
	dst.Requests, dst.Limits = nil, nil
	if len(requests) > 0 {
		dst.Requests = requests
	}
	if len(limits) > 0 {
		dst.Limits = limits
	}
}

// resource applies one CALIBAND_*_REQUEST/_LIMIT variable to list: unset
// keeps the entry, blank deletes it, anything else must be a non-negative
// quantity.
func (p *envParser) resource(name string, r corev1.ResourceName, list corev1.ResourceList) bool {
	v, set := p.get(name)
	switch {
	case !set:
		return true
	case v == "":
		delete(list, r)
		return true
	}
	q, ok := p.quantity(name, v)
	if !ok {
		return false
	}
	if q.Sign() < 0 {
		p.fail("%s %q must not be negative", name, v)
		return false
	}
	list[r] = q
	return true
}

func (p *envParser) clusterDomain(dst *string) {
	v := strings.TrimSuffix(p.optional(EnvClusterDomain), ".")
	if v == "" {
		return
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		p.fail("%s %q is not a DNS domain: %s", EnvClusterDomain, v, strings.Join(errs, "; "))
		return
	}
	*dst = v
}

// podSelector parses "k=v,k2=v2". Every entry, including an empty one left by
// a stray comma, must be key=value: a selector that silently matched more
// pods than written would widen the NetworkPolicy.
func (p *envParser) podSelector(dst *map[string]string) {
	v := p.optional(EnvIngressPodSelector)
	if v == "" {
		return
	}
	sel := map[string]string{}
	ok := true
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		key, value, found := strings.Cut(entry, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !found || key == "" {
			p.fail("%s: bad selector entry '%s' (want key=value)", EnvIngressPodSelector, quoteInner(entry))
			ok = false
			continue
		}
		if errs := content.IsLabelKey(key); len(errs) > 0 {
			p.fail("%s: bad selector entry '%s': key is not a valid label key: %s", EnvIngressPodSelector, quoteInner(entry), strings.Join(errs, "; "))
			ok = false
			continue
		}
		if errs := content.IsLabelValue(value); len(errs) > 0 {
			p.fail("%s: bad selector entry '%s': value is not a valid label value: %s", EnvIngressPodSelector, quoteInner(entry), strings.Join(errs, "; "))
			ok = false
			continue
		}
		if prev, dup := sel[key]; dup && prev != value {
			p.fail("%s: key '%s' is given twice with different values", EnvIngressPodSelector, key)
			ok = false
			continue
		}
		sel[key] = value
	}
	if ok {
		*dst = sel
	}
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

func (p *envParser) seconds(name string, dst *time.Duration) bool {
	v, found, ok := p.present(name)
	if !found {
		return ok
	}
	n, ok := p.integer(name, v, 64, 1, maxLeaseSeconds)
	if ok {
		*dst = time.Duration(n) * time.Second
	}
	return ok
}

func (p *envParser) seccompProfile(dst *corev1.SeccompProfileType) {
	v, found, _ := p.present(EnvAgentSeccompProfile)
	if !found {
		return
	}
	switch t := corev1.SeccompProfileType(v); t {
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		*dst = t
	default:
		p.fail("%s %q is not one of: %s, %s", EnvAgentSeccompProfile, v,
			corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined)
	}
}

// metricsAddress accepts "0" (disabled) or host:port where host is empty, an
// IP address or a DNS name, and port is numeric: a named or zero port would
// bind somewhere nobody scrapes.
func (p *envParser) metricsAddress(dst *string) {
	v, found, _ := p.present(EnvMetricsBindAddress)
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
		p.fail("%s %q is neither 0 (disabled) nor host:port with a port in 1-65535", EnvMetricsBindAddress, v)
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
	// The negated comparison also refuses NaN, which ParseFloat accepts.
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		p.fail("%s %s must be a positive finite number", EnvKubeAPIQPS, v)
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
