// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package charts_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// otelEnv is the OTEL_* part of the Deployment's env, literal values only.
func otelEnv(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range render(t, framework.OperatorChart, values) {
		if o.GetKind() != "Deployment" {
			continue
		}
		for k, v := range deploymentEnv(t, o) {
			if strings.HasPrefix(k, "OTEL_") {
				out[k] = v
			}
		}
	}
	return out
}

// The tracing values become the operator's OpenTelemetry variables, which
// the operator reads back as what was asked for; without an endpoint none
// is rendered, so a platform's injected OTEL_* stay as they are.
func TestTheTracingValuesRenderTheOpenTelemetryVariables(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   map[string]string
	}{
		"no endpoint renders nothing, whatever else is set": {
			values: map[string]any{"tracing": map[string]any{"serviceName": "ops", "sampler": "always_on"}},
			want:   map[string]string{},
		},
		"an endpoint renders it with the protocol, sampler and service name": {
			values: map[string]any{"tracing": map[string]any{"endpoint": "http://otel-collector.observability:4318"}},
			want: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"OTEL_TRACES_SAMPLER":         "parentbased_always_on",
				"OTEL_SERVICE_NAME":           "caliban-operator",
			},
		},
		"a ratio sampler gets its ratio, and resource attributes are joined in key order": {
			values: map[string]any{"tracing": map[string]any{
				"endpoint": "http://collector:4317", "protocol": "grpc", "sampler": "parentbased_traceidratio", "ratio": 0.25,
				"resourceAttributes": map[string]any{"k8s.cluster.name": "eu-1", "deployment.environment.name": "prod"},
			}},
			want: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
				"OTEL_TRACES_SAMPLER_ARG":     "0.25",
				"OTEL_SERVICE_NAME":           "caliban-operator",
				"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=prod,k8s.cluster.name=eu-1",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := otelEnv(t, tc.values)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OTEL_* env (-want +got):\n%s", diff)
			}
			// The operator takes the rendering as it is meant.
			_, err := config.Parse(func(name string) (string, bool) { v, ok := got[name]; return v, ok }, namespace)
			if err != nil {
				t.Errorf("the operator refuses the chart's OTEL_* env: %v", err)
			}
		})
	}
}

// extraEnv lands in the container as written, so that the exporter's own
// settings can come from a Secret.
func TestExtraEnvReachesTheContainer(t *testing.T) {
	headers := map[string]any{
		"name":      "OTEL_EXPORTER_OTLP_HEADERS",
		"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "otlp-auth", "key": "headers"}},
	}
	for _, o := range render(t, framework.OperatorChart, map[string]any{"extraEnv": []any{headers}}) {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		env, _ := containers[0].(map[string]any)["env"].([]any)
		if diff := cmp.Diff(headers, env[len(env)-1]); diff != "" {
			t.Errorf("the last env entry (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatal("no Deployment rendered")
}

func TestTheTracingValuesAreRefusedByName(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   []string
	}{
		"an endpoint without a scheme": {
			values: map[string]any{"tracing": map[string]any{"endpoint": "otel-collector:4318"}},
			want:   []string{"/tracing/endpoint"},
		},
		"an endpoint with a query": {
			values: map[string]any{"tracing": map[string]any{"endpoint": "http://collector:4318/v1/traces?x=1"}},
			want:   []string{"/tracing/endpoint"},
		},
		"OTLP over HTTP with JSON": {
			values: map[string]any{"tracing": map[string]any{"protocol": "http/json"}},
			want:   []string{"/tracing/protocol", "grpc"},
		},
		"an unknown sampler": {
			values: map[string]any{"tracing": map[string]any{"sampler": "sometimes"}},
			want:   []string{"/tracing/sampler"},
		},
		"a ratio above 1": {
			values: map[string]any{"tracing": map[string]any{"sampler": "traceidratio", "ratio": 1.5}},
			want:   []string{"/tracing/ratio", "maximum"},
		},
		"a ratio for a sampler that takes none": {
			values: map[string]any{"tracing": map[string]any{"ratio": 0.1}},
			want:   []string{"tracing.ratio 0.1 has no effect with tracing.sampler parentbased_always_on"},
		},
		"a gRPC endpoint with a path": {
			values: map[string]any{"tracing": map[string]any{"endpoint": "http://collector:4317/v1/traces", "protocol": "grpc"}},
			want:   []string{"tracing.endpoint http://collector:4317/v1/traces has a path, which OTLP over gRPC does not use"},
		},
		"a resource attribute value with a comma": {
			values: map[string]any{"tracing": map[string]any{"resourceAttributes": map[string]any{"team": "a,b"}}},
			want:   []string{"/tracing/resourceAttributes"},
		},
		"an extra env entry without a name": {
			values: map[string]any{"extraEnv": []any{map[string]any{"value": "x"}}},
			want:   []string{"/extraEnv/0", "name"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := framework.RenderChart(root(t), framework.OperatorChart, release, namespace, tc.values)
			if err == nil {
				t.Fatalf("values %v are accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
