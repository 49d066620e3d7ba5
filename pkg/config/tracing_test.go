// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTracing(t *testing.T) {
	const endpoint = "http://otel-collector.observability:4318"
	tests := map[string]struct {
		env map[string]string
		// expected: the defaults changed by want
		want func(s *TracingSettings)
	}{
		"an empty environment leaves tracing off": {
			want: func(*TracingSettings) {},
		},
		"an endpoint turns tracing on, over OTLP/HTTP with protobuf by default": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
			},
		},
		"the traces endpoint alone turns tracing on": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example:443/otlp/v1/traces"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = "https://traces.example:443/otlp/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""
			},
		},
		"the traces endpoint wins over the general one": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/v1/traces"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = "http://tempo:4318/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""
			},
		},
		"values are trimmed, and blank is unset as the specification says": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " " + endpoint + "\n", "OTEL_TRACES_SAMPLER": " ", "OTEL_SERVICE_NAME": ""},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
			},
		},
		"gRPC is chosen by the general protocol": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.Protocol = "http://collector:4317", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "grpc"
			},
		},
		"the traces protocol wins over the general one": {
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317/", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
			},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.Protocol = "http://collector:4317/", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "grpc"
			},
		},
		"a ratio sampler takes its argument": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
				s.Sampler, s.SamplerRatio = "parentbased_traceidratio", 0.25
			},
		},
		"a ratio sampler without an argument samples everything": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "traceidratio"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.Sampler = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "", "traceidratio"
			},
		},
		"the ratio's bounds are ratios": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
				s.Sampler, s.SamplerRatio = "traceidratio", 0
			},
		},
		"every sampler without an argument is accepted": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_off"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.Sampler = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "", "always_off"
			},
		},
		"resource attributes are decoded, and OTEL_SERVICE_NAME wins over their service.name": {
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
				"OTEL_RESOURCE_ATTRIBUTES":    "service.name=from-attributes, deployment.environment.name = prod ,team=a%2Cb%20c",
				"OTEL_SERVICE_NAME":           "caliban-eu",
			},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.ServiceName = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "", "caliban-eu"
				s.ResourceAttributes = map[string]string{"service.name": "from-attributes", "deployment.environment.name": "prod", "team": "a,b c"}
			},
		},
		"a service.name among the resource attributes names the service": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_RESOURCE_ATTRIBUTES": "service.name=ops"},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.ServiceName = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "", "ops"
				s.ResourceAttributes = map[string]string{"service.name": "ops"}
			},
		},
		"the same attribute twice with one value is accepted": {
			env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=a,team=a"},
			want: func(s *TracingSettings) {
				s.ResourceAttributes = map[string]string{"team": "a"}
				s.Unused = []string{"OTEL_RESOURCE_ATTRIBUTES"}
			},
		},
		"OTEL_SDK_DISABLED turns tracing off, whatever else is set, and says what has no effect": {
			env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": "always_on"},
			want: func(s *TracingSettings) {
				s.Off, s.Sampler = "OTEL_SDK_DISABLED is true", "always_on"
				s.Unused = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER"}
			},
		},
		"OTEL_SDK_DISABLED=false leaves tracing on": {
			env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
			},
		},
		"OTEL_TRACES_EXPORTER=none turns tracing off": {
			env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint},
			want: func(s *TracingSettings) {
				s.Off, s.Unused = "OTEL_TRACES_EXPORTER is none", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}
			},
		},
		"OTEL_TRACES_EXPORTER=otlp is the default said aloud": {
			env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", ""
			},
		},
		"settings without an endpoint are named as having no effect": {
			env: map[string]string{"OTEL_SERVICE_NAME": "ops", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: func(s *TracingSettings) {
				s.ServiceName, s.Protocol = "ops", "grpc"
				s.Unused = []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME"}
			},
		},
		"the exporter's settings, each traces variable winning over its general one": {
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":                  "https://collector:4318",
				"OTEL_EXPORTER_OTLP_HEADERS":                   "x-team=ops",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS":            "authorization=Bearer%20t0ken , x-scope = a%2Cb",
				"OTEL_EXPORTER_OTLP_TIMEOUT":                   "2500",
				"OTEL_EXPORTER_OTLP_COMPRESSION":               "gzip",
				"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION":        "none",
				"OTEL_EXPORTER_OTLP_CERTIFICATE":               "/etc/otel/ca.pem",
				"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": "/etc/otel/tls.crt",
				"OTEL_EXPORTER_OTLP_CLIENT_KEY":                "/etc/otel/tls.key",
				"OTEL_EXPORTER_OTLP_INSECURE":                  "false",
			},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off = "https://collector:4318", "OTEL_EXPORTER_OTLP_ENDPOINT", ""
				s.Export = OTLPExport{
					Headers:     map[string]string{"authorization": "Bearer t0ken", "x-scope": "a,b"},
					Timeout:     2500 * time.Millisecond,
					Certificate: "/etc/otel/ca.pem", CertificateVariable: "OTEL_EXPORTER_OTLP_CERTIFICATE",
					ClientCertificate: "/etc/otel/tls.crt", ClientCertificateVariable: "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
					ClientKey: "/etc/otel/tls.key", ClientKeyVariable: "OTEL_EXPORTER_OTLP_CLIENT_KEY",
				}
			},
		},
		"gzip over plain gRPC, said twice": {
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "TRUE",
			},
			want: func(s *TracingSettings) {
				s.Endpoint, s.EndpointVariable, s.Off, s.Protocol = "http://collector:4317", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "grpc"
				s.Export.Gzip = true
			},
		},
		"the exporter's settings have no effect without an endpoint": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b", "OTEL_EXPORTER_OTLP_TIMEOUT": "100"},
			want: func(s *TracingSettings) {
				s.Export.Headers, s.Export.Timeout = map[string]string{"a": "b"}, 100*time.Millisecond
				s.Unused = []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT"}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := DefaultTracingSettings()
			tc.want(&want)
			got, err := parseProcessSettings(settingsEnv(tc.env), settingsPodNamespace)
			if err != nil {
				t.Fatalf("unexpected error:\n%v", err)
			}
			if diff := cmp.Diff(want, got.Tracing); diff != "" {
				t.Errorf("Tracing (-want +got):\n%s", diff)
			}
			if got.Tracing.Enabled() != (want.Off == "") {
				t.Errorf("Enabled() = %t with Off %q", got.Tracing.Enabled(), want.Off)
			}
		})
	}
}

func TestParseTracingRefuses(t *testing.T) {
	tests := map[string]struct {
		env map[string]string
		// expected error, one problem per line
		want []string
	}{
		"a header entry that is not key=value, named by its place and not quoted, as it may hold a secret": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=b,Bearer s3cret"},
			want: []string{"OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value"},
		},
		"a header value that is not percent-encoded, without the value": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=100%s3cret"},
			want: []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS: the value of 'authorization' is not percent-encoded"},
		},
		"a timeout with a unit": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"},
			want: []string{`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT "10s" is not a positive number of milliseconds (e.g. 10000)`},
		},
		"a zero timeout": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "0"},
			want: []string{`OTEL_EXPORTER_OTLP_TIMEOUT "0" is not a positive number of milliseconds (e.g. 10000)`},
		},
		"a compression the exporter does not have": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			want: []string{`OTEL_EXPORTER_OTLP_COMPRESSION "zstd" is not one of: gzip, none`},
		},
		"a client certificate without its key": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": "/tls.crt"},
			want: []string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: set both or neither"},
		},
		"a CA bundle for an endpoint without TLS": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"},
			want: []string{`OTEL_EXPORTER_OTLP_CERTIFICATE is set, but the endpoint "http://c:4318" is http:// (no TLS); use https://`},
		},
		"a CA bundle for an endpoint without TLS, its scheme in capitals": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "HTTP://c:4318", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/c.pem"},
			want: []string{
				`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set, but the endpoint "HTTP://c:4318" is http:// (no TLS); use https://`,
				`OTEL_EXPORTER_OTLP_CLIENT_KEY is set, but the endpoint "HTTP://c:4318" is http:// (no TLS); use https://`,
			},
		},
		"insecure against an https endpoint": {
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
			},
			want: []string{`OTEL_EXPORTER_OTLP_INSECURE true contradicts the endpoint "https://c:4317"; the scheme decides (http:// without TLS, https:// with)`},
		},
		"OTLP over HTTP with JSON": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			want: []string{`OTEL_EXPORTER_OTLP_PROTOCOL "http/json" is not one of: grpc, http/protobuf`},
		},
		"an unknown traces protocol, even when the general one is right": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "GRPC"},
			want: []string{`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL "GRPC" is not one of: grpc, http/protobuf`},
		},
		"an endpoint without a scheme, which the exporter would replace with localhost": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "otel-collector:4318"},
			want: []string{`OTEL_EXPORTER_OTLP_ENDPOINT "otel-collector:4318" is not an http:// or https:// URL with a host and an optional port in 1-65535 (e.g. http://otel-collector.observability:4318)`},
		},
		"an endpoint of another scheme": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "unix:///run/otel.sock"},
			want: []string{`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "unix:///run/otel.sock" is not an http:// or https:// URL with a host and an optional port in 1-65535 (e.g. http://otel-collector.observability:4318)`},
		},
		"an endpoint with a port beyond 65535": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:70000"},
			want: []string{`OTEL_EXPORTER_OTLP_ENDPOINT "http://collector:70000" is not an http:// or https:// URL with a host and an optional port in 1-65535 (e.g. http://otel-collector.observability:4318)`},
		},
		"an endpoint with credentials in it": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:secret@collector:4318"},
			want: []string{`OTEL_EXPORTER_OTLP_ENDPOINT "https://user:secret@collector:4318" carries credentials, which the exporter would drop; send them with OTEL_EXPORTER_OTLP_HEADERS`},
		},
		"an endpoint with a query": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces?tenant=a"},
			want: []string{`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "http://collector:4318/v1/traces?tenant=a" has a query or a fragment, which the exporter would drop`},
		},
		"a gRPC endpoint with a path": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: []string{`OTEL_EXPORTER_OTLP_ENDPOINT "http://collector:4317/v1/traces" has a path, which OTLP over gRPC does not use`},
		},
		"an unknown sampler": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"},
			want: []string{`OTEL_TRACES_SAMPLER "sometimes" is not one of: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`},
		},
		"a remote sampler": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_jaeger_remote"},
			want: []string{`OTEL_TRACES_SAMPLER "parentbased_jaeger_remote" is not one of: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`},
		},
		"a ratio above 1": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"},
			want: []string{`OTEL_TRACES_SAMPLER_ARG "1.5" is not a ratio between 0 and 1 (e.g. 0.25)`},
		},
		"a negative ratio": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "-0.1"},
			want: []string{`OTEL_TRACES_SAMPLER_ARG "-0.1" is not a ratio between 0 and 1 (e.g. 0.25)`},
		},
		"a ratio that is not a number": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%"},
			want: []string{`OTEL_TRACES_SAMPLER_ARG "10%" is not a ratio between 0 and 1 (e.g. 0.25)`},
		},
		"NaN as a ratio": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "NaN"},
			want: []string{`OTEL_TRACES_SAMPLER_ARG "NaN" is not a ratio between 0 and 1 (e.g. 0.25)`},
		},
		"a ratio for the default sampler, which takes none": {
			env:  map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0.1"},
			want: []string{"OTEL_TRACES_SAMPLER_ARG 0.1 has no effect with OTEL_TRACES_SAMPLER parentbased_always_on; set OTEL_TRACES_SAMPLER to traceidratio or parentbased_traceidratio"},
		},
		"OTEL_SDK_DISABLED in another spelling of true": {
			env:  map[string]string{"OTEL_SDK_DISABLED": "1"},
			want: []string{`OTEL_SDK_DISABLED "1" is not a boolean; use true or false`},
		},
		"an exporter other than OTLP": {
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			want: []string{`OTEL_TRACES_EXPORTER "zipkin" is not one of: otlp, none`},
		},
		"resource attributes that are not key=value": {
			env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=a,prod,=x,"},
			want: []string{
				"OTEL_RESOURCE_ATTRIBUTES: bad entry 'prod' (want key=value)",
				"OTEL_RESOURCE_ATTRIBUTES: bad entry '=x' (want key=value)",
				"OTEL_RESOURCE_ATTRIBUTES: bad entry '' (want key=value)",
			},
		},
		"a resource attribute whose value is not percent-encoded": {
			env:  map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=100%"},
			want: []string{`OTEL_RESOURCE_ATTRIBUTES: the value of 'team' is not percent-encoded: invalid URL escape "%"`},
		},
		"a resource attribute given twice with different values": {
			env:  map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=a,team=b"},
			want: []string{"OTEL_RESOURCE_ATTRIBUTES: key 'team' is given twice with different values"},
		},
		"a bad value is refused even while tracing is off": {
			env:  map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_SAMPLER": "never"},
			want: []string{`OTEL_TRACES_SAMPLER "never" is not one of: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio`},
		},
		"every problem is reported, in the documented order of checks": {
			env: map[string]string{
				"OTEL_RESOURCE_ATTRIBUTES": "x", "OTEL_TRACES_SAMPLER_ARG": "2", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "yes",
				"CALIBAN_LOG_FORMAT": "xml",
			},
			want: []string{
				`CALIBAN_LOG_FORMAT "xml" is not one of: text, json`,
				`OTEL_SDK_DISABLED "yes" is not a boolean; use true or false`,
				`OTEL_TRACES_EXPORTER "console" is not one of: otlp, none`,
				`OTEL_EXPORTER_OTLP_PROTOCOL "http/json" is not one of: grpc, http/protobuf`,
				`OTEL_EXPORTER_OTLP_ENDPOINT "collector" is not an http:// or https:// URL with a host and an optional port in 1-65535 (e.g. http://otel-collector.observability:4318)`,
				`OTEL_TRACES_SAMPLER_ARG "2" is not a ratio between 0 and 1 (e.g. 0.25)`,
				"OTEL_RESOURCE_ATTRIBUTES: bad entry 'x' (want key=value)",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(settingsEnv(tc.env), settingsPodNamespace)
			if err == nil {
				t.Fatalf("no error; tracing settings %+v", got.Tracing)
			}
			if diff := cmp.Diff(tc.want, settingsErrorLines(err)); diff != "" {
				t.Errorf("error lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTracingTargetIsWhereTheExporterSends(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"OTLP/HTTP appends /v1/traces to the general endpoint": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: "http://collector:4318/v1/traces",
		},
		"OTLP/HTTP appends it to the general endpoint's path too": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://gateway.example/otlp/"},
			want: "https://gateway.example/otlp/v1/traces",
		},
		"OTLP/HTTP takes the traces endpoint as given": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom"},
			want: "http://collector:4318/custom",
		},
		"OTLP/gRPC dials the endpoint as given": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: "http://collector:4317",
		},
		"tracing off has no target": {
			env:  map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := parseProcessSettings(settingsEnv(tc.env), settingsPodNamespace)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Tracing.Target(); got != tc.want {
				t.Errorf("Target() = %q, want %q", got, tc.want)
			}
		})
	}
}
