// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Package codec is the JSON codec of the operator's REST clients for custom
// resources (its own CalibanTasks and Workspaces, agent-sandbox's
// Sandboxes): client-go's JSON serializer with three shortcuts that decode
// the same objects for less CPU, each checked against client-go's answer
// by a test and a fuzz target. Decoding watch events is most of what the
// operator's CPU does (docs/performance.md).
//
//   - leadingKind reads an object's apiVersion and kind from its leading
//     members instead of a full pass;
//   - watchEventSerializer cuts a watch event's object out of its envelope by
//     its fixed shape, and objectFramer splits a watch stream by counting
//     braces;
//   - v2Decoder unmarshals typed objects with encoding/json/v2, falling back
//     to client-go's decoder for anything it does not take.
//
// ResourceVersion reads one member of a write's answer, for a caller that
// knows the rest.
package codec
