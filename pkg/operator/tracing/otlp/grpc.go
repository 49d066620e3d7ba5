// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// grpcExportPath is TraceService/Export's path.
const grpcExportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// grpcRetryable are the gRPC status codes the specification retries.
// RESOURCE_EXHAUSTED is retried only with a RetryInfo in the status
// details, which this client does not read: it is final here.
var grpcRetryable = map[int]bool{
	1:  true, // CANCELLED
	4:  true, // DEADLINE_EXCEEDED
	10: true, // ABORTED
	11: true, // OUT_OF_RANGE
	14: true, // UNAVAILABLE
	15: true, // DATA_LOSS
}

// grpcProtocol is OTLP/gRPC's unary call on HTTP/2: one length-prefixed
// message each way, the status in the trailers. Written on net/http
// rather than with grpc-go, whose stack (and the html/template it links)
// would double the operator's binary and its idle memory whether tracing
// is on or not.
type grpcProtocol struct{}

func (grpcProtocol) request(msg []byte, gz bool, header http.Header) ([]byte, error) {
	header.Set("Content-Type", "application/grpc+proto")
	header.Set("TE", "trailers")
	compressed := byte(0)
	if gz {
		var err error
		if msg, err = gzipped(msg); err != nil {
			return nil, err
		}
		header.Set("Grpc-Encoding", "gzip")
		compressed = 1
	}
	framed := make([]byte, 5, 5+len(msg))
	framed[0] = compressed
	binary.BigEndian.PutUint32(framed[1:], uint32(len(msg)))
	return append(framed, msg...), nil
}

func (grpcProtocol) outcome(resp *http.Response) ([]byte, error) {
	if isRedirect(resp) {
		return nil, fmt.Errorf("OTLP/gRPC export: HTTP %s: %s", resp.Status, redirectProblem(resp))
	}
	if resp.StatusCode != http.StatusOK {
		// Not a gRPC answer: a proxy's, mapped as gRPC maps HTTP statuses.
		failure := fmt.Errorf("OTLP/gRPC export: HTTP %s", resp.Status)
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return nil, &retryable{err: failure}
		}
		return nil, failure
	}
	// The trailers come after the body.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, &retryable{err: fmt.Errorf("OTLP/gRPC export: reading the answer: %w", err)}
	}
	status, message := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		// A trailers-only answer puts the status in the headers.
		status, message = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	code, err := strconv.Atoi(status)
	if err != nil {
		return nil, fmt.Errorf("OTLP/gRPC export: the answer has no grpc-status")
	}
	if code != 0 { // OK
		if m, err := url.PathUnescape(message); err == nil {
			message = m
		}
		failure := fmt.Errorf("OTLP/gRPC export: status %d: %s", code, message)
		if grpcRetryable[code] {
			return nil, &retryable{err: failure}
		}
		return nil, failure
	}
	// The answer is one uncompressed message: no grpc-accept-encoding was
	// offered.
	if len(body) < 5 || body[0] != 0 {
		return nil, nil
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if int(n) > len(body)-5 {
		return nil, nil
	}
	return body[5 : 5+n], nil
}
