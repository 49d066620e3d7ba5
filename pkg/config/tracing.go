// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// The OpenTelemetry variables the operator reads (docs/deploying.md#tracing).
// They are the specification's own names, so that the environment a
// platform injects into every workload configures the operator too. The
// SDK reads its batch and limit settings (OTEL_BSP_*, OTEL_SPAN_*) itself.
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

// The exporter's variables, each read as OTEL_EXPORTER_OTLP_<name> and
// overridden by OTEL_EXPORTER_OTLP_TRACES_<name> when that is set.
const (
	OTLPHeaders           = "HEADERS"
	OTLPTimeout           = "TIMEOUT"
	OTLPCompression       = "COMPRESSION"
	OTLPCertificate       = "CERTIFICATE"
	OTLPClientCertificate = "CLIENT_CERTIFICATE"
	OTLPClientKey         = "CLIENT_KEY"
	OTLPInsecure          = "INSECURE"
)

var otlpExporterVariables = []string{OTLPHeaders, OTLPTimeout, OTLPCompression, OTLPCertificate, OTLPClientCertificate, OTLPClientKey, OTLPInsecure}

// DefaultOTLPTimeout bounds one export, retries included, as the
// specification's default does.
const DefaultOTLPTimeout = 10 * time.Second

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
	// Export is how the spans are sent.
	Export OTLPExport
}

// OTLPExport is the exporter's settings. A value read from a file (a
// certificate, a key) is its path: the exporter reads the file when it
// starts, and start-up fails naming the variable if it cannot.
type OTLPExport struct {
	// Headers go with every export request; their values may be secrets
	// and are never logged.
	Headers map[string]string
	// Timeout bounds one export, retries included.
	Timeout time.Duration
	Gzip    bool
	// Certificate is a PEM bundle of the CAs that may sign the endpoint's
	// certificate, instead of the system's; ClientCertificate and ClientKey
	// a PEM pair the operator presents. Each names the variable it came
	// from in CertificateVariable, ClientCertificateVariable and
	// ClientKeyVariable, for start-up's errors.
	Certificate, CertificateVariable             string
	ClientCertificate, ClientCertificateVariable string
	ClientKey, ClientKeyVariable                 string
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
		Export:       OTLPExport{Timeout: DefaultOTLPTimeout},
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

	s.Export = p.otlpExport(endpoint)

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
		for _, v := range otlpExporterVariables {
			for _, name := range []string{otlpVariable(v), otlpTracesVariable(v)} {
				if p.optional(name) != "" {
					s.Unused = append(s.Unused, name)
				}
			}
		}
	}
	return s
}

func otlpVariable(name string) string       { return "OTEL_EXPORTER_OTLP_" + name }
func otlpTracesVariable(name string) string { return "OTEL_EXPORTER_OTLP_TRACES_" + name }

// otlpValue is the exporter variable's value and the variable it came
// from: the traces one when set, else the general one; "" and "" when
// neither is set.
func (p *envParser) otlpValue(name string) (value, variable string) {
	for _, variable := range []string{otlpTracesVariable(name), otlpVariable(name)} {
		if v := p.optional(variable); v != "" {
			return v, variable
		}
	}
	return "", ""
}

// otlpExport reads the exporter's variables the specification's way,
// refusing what its exporters would drop with a warning or ignore: a
// header entry that is not key=value, a timeout that is not a positive
// number of milliseconds, a compression other than gzip or none, a half
// client pair, TLS files or an insecure flag that contradict the
// endpoint's scheme.
func (p *envParser) otlpExport(endpoint string) OTLPExport {
	e := OTLPExport{Timeout: DefaultOTLPTimeout}
	if v, name := p.otlpValue(OTLPHeaders); v != "" {
		// A header's value is likely a credential: errors name the key, never
		// the value.
		e.Headers = p.keyValues(name, v, false)
	}
	if v, name := p.otlpValue(OTLPTimeout); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			p.fail("%s %q is not a positive number of milliseconds (e.g. 10000)", name, v)
		} else {
			e.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	switch v, name := p.otlpValue(OTLPCompression); v {
	case "", "none":
	case "gzip":
		e.Gzip = true
	default:
		p.fail("%s %q is not one of: gzip, none", name, v)
	}
	e.Certificate, e.CertificateVariable = p.otlpValue(OTLPCertificate)
	e.ClientCertificate, e.ClientCertificateVariable = p.otlpValue(OTLPClientCertificate)
	e.ClientKey, e.ClientKeyVariable = p.otlpValue(OTLPClientKey)
	if (e.ClientCertificate == "") != (e.ClientKey == "") {
		p.fail("%s and %s go together: set both or neither", otlpVariable(OTLPClientCertificate), otlpVariable(OTLPClientKey))
	}
	// The scheme as the exporter reads it: url.Parse lowers its case.
	u, _ := url.Parse(endpoint)
	plain := u != nil && u.Scheme == "http"
	if plain {
		for _, f := range [][2]string{{e.Certificate, e.CertificateVariable}, {e.ClientCertificate, e.ClientCertificateVariable}, {e.ClientKey, e.ClientKeyVariable}} {
			if f[0] != "" {
				p.fail("%s is set, but the endpoint %q is http:// (no TLS); use https://", f[1], endpoint)
			}
		}
	}
	if v, name := p.otlpValue(OTLPInsecure); v != "" {
		insecure := p.otelBool(name)
		// The endpoint's scheme says whether TLS is used, as the
		// specification has it; a flag that says otherwise is a mistake.
		if endpoint != "" && insecure != plain {
			p.fail("%s %s contradicts the endpoint %q; the scheme decides (http:// without TLS, https:// with)", name, v, endpoint)
		}
	}
	return e
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
	return p.keyValues(EnvOTelResourceAttributes, v, true)
}

// keyValues reads the specification's list of key=value pairs separated
// by commas, each value percent-encoded where it holds a comma, an equals
// sign or a space. showValues says whether errors may quote an entry; for
// headers they name the key alone.
func (p *envParser) keyValues(name, v string, showValues bool) map[string]string {
	kvs := map[string]string{}
	ok := true
	for i, entry := range strings.Split(v, ",") {
		key, value, found := strings.Cut(entry, "=")
		key = strings.TrimSpace(key)
		if !found || key == "" {
			if showValues {
				p.fail("%s: bad entry '%s' (want key=value)", name, quoteInner(strings.TrimSpace(entry)))
			} else {
				p.fail("%s: entry %d is not key=value", name, i+1)
			}
			ok = false
			continue
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			if showValues {
				p.fail("%s: the value of '%s' is not percent-encoded: %v", name, quoteInner(key), err)
			} else {
				p.fail("%s: the value of '%s' is not percent-encoded", name, quoteInner(key))
			}
			ok = false
			continue
		}
		if prev, dup := kvs[key]; dup && prev != decoded {
			p.fail("%s: key '%s' is given twice with different values", name, quoteInner(key))
			ok = false
			continue
		}
		kvs[key] = decoded
	}
	if !ok {
		return nil
	}
	return kvs
}
