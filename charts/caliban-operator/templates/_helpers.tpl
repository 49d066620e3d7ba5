{{/*
The objects are named caliban-operator whatever the release is called: the
operator is one per cluster (its CRDs, ClusterRole and admission policies
are cluster-wide), and manifests/ uses the same names.
*/}}
{{- define "caliban-operator.name" -}}
caliban-operator
{{- end }}

{{/* Labels of every object: manifests/' own, then Helm's bookkeeping. */}}
{{- define "caliban-operator.labels" -}}
app.kubernetes.io/name: {{ include "caliban-operator.name" . }}
{{ include "caliban-operator.helmLabels" . }}
{{- end }}

{{/* Helm's bookkeeping labels. */}}
{{- define "caliban-operator.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The admission objects' labels. */}}
{{- define "caliban-operator.admissionLabels" -}}
{{ include "caliban-operator.labels" . }}
app.kubernetes.io/component: admission
{{- end }}

{{/*
"true" when the cluster serves the admission policy kinds the component is
made of (Kubernetes 1.36 or later), else empty. helm install and upgrade
ask the cluster; helm template without a cluster knows only group
versions, so it renders the component only when told the kinds with
--api-versions.
*/}}
{{- define "caliban-operator.admissionServed" -}}
{{- if and (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") }}true{{ end }}
{{- end }}

{{/* "true" when the admission component is rendered, else empty. */}}
{{- define "caliban-operator.admissionRendered" -}}
{{- if and .Values.admission.enabled (include "caliban-operator.admissionServed" .) }}true{{ end }}
{{- end }}

{{/* The labels of the PrometheusRule and the dashboard ConfigMap. */}}
{{- define "caliban-operator.monitoringLabels" -}}
{{ include "caliban-operator.labels" . }}
app.kubernetes.io/component: monitoring
{{- end }}

{{/* The pods' selector: only the name, as in manifests/base. */}}
{{- define "caliban-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "caliban-operator.name" . }}
{{- end }}

{{- define "caliban-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.name }}{{ .Values.serviceAccount.name }}{{ else }}{{ include "caliban-operator.name" . }}{{ end }}
{{- end }}

{{- define "caliban-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The operator's RBAC rules, cluster-wide or in the watched namespace. */}}
{{- define "caliban-operator.rules" -}}
- apiGroups: [caliban.caliban-ai.dev]
  resources: [calibantasks, workspaces]
  verbs: [get, list, watch]
# patch: the drain finalizer of tasks with lifecycle.onDelete checkpoint;
# delete: a finished task's ttlSecondsAfterFinished. Nothing else.
- apiGroups: [caliban.caliban-ai.dev]
  resources: [calibantasks]
  verbs: [patch, delete]
- apiGroups: [caliban.caliban-ai.dev]
  resources: [calibantasks/status, workspaces/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
# A task's pod, read by name until it carries the task's UID label: only
# then is a NetworkPolicy made before that label moved to it (ADR 0029).
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [agents.x-k8s.io]
  resources: [sandboxes]
  verbs: [get, list, watch, create, patch, delete]
# Warm pools (docs/warm-start.md): a template and a pool per Workspace
# that asks for one, a claim per warm task; delete for a rolled template,
# a pool turned off, and a claim served another rendering.
- apiGroups: [extensions.agents.x-k8s.io]
  resources: [sandboxtemplates, sandboxwarmpools, sandboxclaims]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/* OTEL_RESOURCE_ATTRIBUTES from the map: key=value, in key order. */}}
{{- define "caliban-operator.resourceAttributes" -}}
{{- $pairs := list }}
{{- range $k, $v := . }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
The rules between values that values.schema.json cannot state; the operator
refuses the same combinations at start-up (pkg/config).
*/}}
{{- define "caliban-operator.validate" -}}
{{- $le := .Values.leaderElection }}
{{- if ge ($le.graceSeconds | int64) ($le.durationSeconds | int64) }}
{{- fail (printf "leaderElection.graceSeconds %d must be less than leaderElection.durationSeconds %d" ($le.graceSeconds | int64) ($le.durationSeconds | int64)) }}
{{- end }}
{{- $a := .Values.agent }}
{{- if gt ($a.portBase | int64) ($a.portEnd | int64) }}
{{- fail (printf "agent.portBase %d is greater than agent.portEnd %d: the agent port window is empty" ($a.portBase | int64) ($a.portEnd | int64)) }}
{{- end }}
{{- if and (ge ($a.calibandPort | int64) ($a.portBase | int64)) (le ($a.calibandPort | int64) ($a.portEnd | int64)) }}
{{- fail (printf "agent.calibandPort %d falls inside the agent port window %d-%d" ($a.calibandPort | int64) ($a.portBase | int64) ($a.portEnd | int64)) }}
{{- end }}
{{- $t := .Values.tracing }}
{{- if and (ne (toString $t.ratio) "1") (not (has $t.sampler (list "traceidratio" "parentbased_traceidratio"))) }}
{{- fail (printf "tracing.ratio %v has no effect with tracing.sampler %s; use traceidratio or parentbased_traceidratio" $t.ratio $t.sampler) }}
{{- end }}
{{- if and (eq $t.protocol "grpc") (regexMatch "^https?://[^/]+/.+" $t.endpoint) }}
{{- fail (printf "tracing.endpoint %s has a path, which OTLP over gRPC does not use" $t.endpoint) }}
{{- end }}
{{- end }}
