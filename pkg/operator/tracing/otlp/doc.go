// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package otlp sends the operator's spans to an OTLP endpoint over
// OTLP/HTTP with protobuf bodies or over OTLP/gRPC, both on net/http. It is
// the client under the OpenTelemetry SDK's exporter (otlptrace.Client),
// configured from the exporter's variables as pkg/config reads them
// (headers, timeout, gzip, CA bundle, client certificate), and retries what
// the specification says to retry until the export's timeout.
//
// Why not the OpenTelemetry exporters: each links grpc-go and the
// collector's generated service, and through them html/template, whose
// reflection keeps every exported method of every type in the binary.
// That doubled the binary and the idle memory with tracing off (ADR 0028).
package otlp
