package config

import (
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// The OpenTelemetry variables the operator reads itself
// (docs/deploying.md#tracing). They are the specification's own names, so
// that the environment a platform injects into every workload configures
// the operator too. The OTLP exporter reads its own (headers, timeout,
// TLS, compression) and the SDK its batch and limit settings.
const (
	EnvOTelSDKDisabled        = "OTEL_SDK_DISABLED"
	EnvOTelTracesExporter     = "OTEL_TRACES_EXPORTER"
	EnvOTLPProtocol           = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTLPTracesProtocol     = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvOTLPEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTelTracesSampler      = "OTEL_TRACES_SAMPLER"
	EnvOTelTracesSamplerArg   = "OTEL_TRACES_SAMPLER_ARG"
	EnvOTelServiceName        = "OTEL_SERVICE_NAME"
	EnvOTelResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
)

// OTLP protocols the operator exports with. OTLP/HTTP with JSON bodies is
// not one: nothing needs it, and one encoding over HTTP is one less path
// to test.
const (
	TracingProtocolGRPC         = "grpc"
	TracingProtocolHTTPProtobuf = "http/protobuf"
)

// Samplers of OTEL_TRACES_SAMPLER the operator builds. The remote ones
// (jaeger_remote, xray) would need a sampling service and code of their
// own.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

var samplers = []string{
	SamplerAlwaysOn, SamplerAlwaysOff, SamplerTraceIDRatio,
	SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio,
}

// DefaultServiceName is the service.name of the operator's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const DefaultServiceName = "caliban-operator"

// otlpTracesPath is what OTLP/HTTP appends to OTEL_EXPORTER_OTLP_ENDPOINT
// (not to the traces endpoint, which is used as given).
const otlpTracesPath = "/v1/traces"

// tracingOffNoEndpoint is why tracing is off in an empty environment.
const tracingOffNoEndpoint = "neither " + EnvOTLPEndpoint + " nor " + EnvOTLPTracesEndpoint + " is set"

// TracingSettings is whether, and where, the operator sends its traces.
// Tracing is on only with an endpoint: the OpenTelemetry default of
// localhost would send spans nowhere in a pod, at a cost.
type TracingSettings struct {
	// Endpoint is the OTLP endpoint, as given in EndpointVariable
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT);
	// "" when tracing is off.
	Endpoint         string
	EndpointVariable string
	// Protocol is TracingProtocolGRPC or TracingProtocolHTTPProtobuf.
	Protocol string
	// Sampler is one of the Sampler constants; SamplerRatio is the ratio
	// of the traceidratio ones, and 1 for the others.
	Sampler      string
	SamplerRatio float64
	ServiceName  string
	// ResourceAttributes is OTEL_RESOURCE_ATTRIBUTES decoded, nil when
	// unset. A service.name in it yields to OTEL_SERVICE_NAME, as the
	// specification says; ServiceName is the outcome.
	ResourceAttributes map[string]string
	// Off says why tracing is off, "" when it is on.
	Off string
	// Unused names the tracing variables that are set although tracing is
	// off, so that start-up can say they have no effect.
	Unused []string
}

// Enabled reports whether the operator exports spans.
func (s TracingSettings) Enabled() bool { return s.Endpoint != "" }

// Target is where the exporter sends spans: for OTLP/HTTP from
// OTEL_EXPORTER_OTLP_ENDPOINT, that URL with /v1/traces appended to its
// path, as the exporter does; otherwise the endpoint itself.
func (s TracingSettings) Target() string {
	if s.Protocol != TracingProtocolHTTPProtobuf || s.EndpointVariable != EnvOTLPEndpoint {
		return s.Endpoint
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return s.Endpoint
	}
	u.Path = path.Join(u.Path, otlpTracesPath)
	return u.String()
}

// DefaultTracingSettings is tracing in an empty environment: off, with the
// specification's defaults for when an endpoint is set.
func DefaultTracingSettings() TracingSettings {
	return TracingSettings{
		Protocol:     TracingProtocolHTTPProtobuf,
		Sampler:      SamplerParentBasedAlwaysOn,
		SamplerRatio: 1,
		ServiceName:  DefaultServiceName,
		Off:          tracingOffNoEndpoint,
	}
}

// tracing reads the OpenTelemetry variables with the specification's
// rules where they differ from the operator's: a blank value is unset,
// and OTEL_SDK_DISABLED is true or false. What the specification would
// ignore with a warning (an unknown sampler, a ratio outside [0,1]) is
// refused here, like every other setting; so is an endpoint the exporter
// would misread (it drops a query, a user and, over gRPC, a path, and
// falls back to localhost when it cannot parse the URL).
func (p *envParser) tracing() TracingSettings {
	s := DefaultTracingSettings()
	disabled := p.otelBool(EnvOTelSDKDisabled)
	exporterNone := p.tracesExporter()

	protocolOK := p.otlpProtocol(EnvOTLPProtocol, &s.Protocol)
	protocolOK = p.otlpProtocol(EnvOTLPTracesProtocol, &s.Protocol) && protocolOK
	grpc := protocolOK && s.Protocol == TracingProtocolGRPC
	endpoint, endpointVar := "", ""
	for _, name := range []string{EnvOTLPEndpoint, EnvOTLPTracesEndpoint} {
		if v, ok := p.otlpEndpoint(name, grpc); ok && v != "" {
			endpoint, endpointVar = v, name
		}
	}

	samplerOK := p.sampler(&s.Sampler)
	p.samplerArg(s.Sampler, samplerOK, &s.SamplerRatio)
	s.ResourceAttributes = p.resourceAttributes()
	if name, ok := s.ResourceAttributes["service.name"]; ok && name != "" {
		s.ServiceName = name
	}
	if v := p.optional(EnvOTelServiceName); v != "" {
		s.ServiceName = v
	}

	switch {
	case disabled:
		s.Off = EnvOTelSDKDisabled + " is true"
	case exporterNone:
		s.Off = EnvOTelTracesExporter + " is none"
	case endpoint == "":
		s.Off = tracingOffNoEndpoint
	default:
		s.Off, s.Endpoint, s.EndpointVariable = "", endpoint, endpointVar
	}
	if s.Off != "" {
		for _, name := range []string{
			EnvOTLPProtocol, EnvOTLPTracesProtocol, EnvOTLPEndpoint, EnvOTLPTracesEndpoint, EnvOTelTracesSampler,
			EnvOTelTracesSamplerArg, EnvOTelServiceName, EnvOTelResourceAttributes,
		} {
			if p.optional(name) != "" {
				s.Unused = append(s.Unused, name)
			}
		}
	}
	return s
}

// otelBool reads a boolean the specification's way: true or false, in any
// case. Its other spellings would be false there, silently; here they are
// refused.
func (p *envParser) otelBool(name string) bool {
	v := p.optional(name)
	switch strings.ToLower(v) {
	case "", "false":
		return false
	case "true":
		return true
	}
	p.fail("%s %q is not a boolean; use true or false", name, v)
	return false
}

// tracesExporter reports whether OTEL_TRACES_EXPORTER turns tracing off.
func (p *envParser) tracesExporter() (none bool) {
	switch v := p.optional(EnvOTelTracesExporter); v {
	case "", "otlp":
		return false
	case "none":
		return true
	default:
		p.fail("%s %q is not one of: otlp, none", EnvOTelTracesExporter, v)
		return false
	}
}

func (p *envParser) otlpProtocol(name string, dst *string) bool {
	switch v := p.optional(name); v {
	case "":
	case TracingProtocolGRPC, TracingProtocolHTTPProtobuf:
		*dst = v
	default:
		p.fail("%s %q is not one of: %s, %s", name, v, TracingProtocolGRPC, TracingProtocolHTTPProtobuf)
		return false
	}
	return true
}

// otlpEndpoint reads an endpoint URL: http (no TLS) or https, a host, an
// optional port, and nothing the exporter would drop.
func (p *envParser) otlpEndpoint(name string, grpc bool) (string, bool) {
	v := p.optional(name)
	if v == "" {
		return "", true
	}
	u, err := url.Parse(v)
	valid := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" && u.Opaque == ""
	if valid && u.Port() != "" {
		n, err := strconv.Atoi(u.Port())
		valid = err == nil && n >= 1 && n <= 65535
	}
	switch {
	case !valid:
		p.fail("%s %q is not an http:// or https:// URL with a host and an optional port in 1-65535 (e.g. http://otel-collector.observability:4318)", name, v)
	case u.User != nil:
		p.fail("%s %q carries credentials, which the exporter would drop; send them with OTEL_EXPORTER_OTLP_HEADERS", name, v)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		p.fail("%s %q has a query or a fragment, which the exporter would drop", name, v)
	case grpc && u.Path != "" && u.Path != "/":
		p.fail("%s %q has a path, which OTLP over gRPC does not use", name, v)
	default:
		return v, true
	}
	return "", false
}

func (p *envParser) sampler(dst *string) bool {
	v := p.optional(EnvOTelTracesSampler)
	if v == "" {
		return true
	}
	for _, s := range samplers {
		if v == s {
			*dst = v
			return true
		}
	}
	p.fail("%s %q is not one of: %s", EnvOTelTracesSampler, v, strings.Join(samplers, ", "))
	return false
}

// samplerArg reads the ratio of a traceidratio sampler. An argument the
// sampler takes no notice of is refused: whoever set it expected it to
// count.
func (p *envParser) samplerArg(sampler string, samplerOK bool, dst *float64) {
	v := p.optional(EnvOTelTracesSamplerArg)
	if v == "" {
		return
	}
	f, err := strconv.ParseFloat(v, 64)
	// The negated comparison also refuses NaN, which ParseFloat accepts.
	if err != nil || !(f >= 0 && f <= 1) || math.IsInf(f, 0) {
		p.fail("%s %q is not a ratio between 0 and 1 (e.g. 0.25)", EnvOTelTracesSamplerArg, v)
		return
	}
	if samplerOK && sampler != SamplerTraceIDRatio && sampler != SamplerParentBasedTraceIDRatio {
		p.fail("%s %s has no effect with %s %s; set %s to %s or %s", EnvOTelTracesSamplerArg, v,
			EnvOTelTracesSampler, sampler, EnvOTelTracesSampler, SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio)
		return
	}
	*dst = f
}

// resourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: key=value pairs
// separated by commas, each value percent-encoded where it holds a comma,
// an equals sign or a space.
func (p *envParser) resourceAttributes() map[string]string {
	v := p.optional(EnvOTelResourceAttributes)
	if v == "" {
		return nil
	}
	attrs := map[string]string{}
	ok := true
	for _, entry := range strings.Split(v, ",") {
		key, value, found := strings.Cut(entry, "=")
		key = strings.TrimSpace(key)
		if !found || key == "" {
			p.fail("%s: bad entry '%s' (want key=value)", EnvOTelResourceAttributes, quoteInner(strings.TrimSpace(entry)))
			ok = false
			continue
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			p.fail("%s: the value of '%s' is not percent-encoded: %v", EnvOTelResourceAttributes, quoteInner(key), err)
			ok = false
			continue
		}
		if prev, dup := attrs[key]; dup && prev != decoded {
			p.fail("%s: key '%s' is given twice with different values", EnvOTelResourceAttributes, quoteInner(key))
			ok = false
			continue
		}
		attrs[key] = decoded
	}
	if !ok {
		return nil
	}
	return attrs
}
