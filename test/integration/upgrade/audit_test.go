// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// childWrite is one write the audit log holds of a child.
type childWrite struct {
	Verb, Subresource string
	Code              int
	At                time.Time
	// Message is the apiserver's reason for a refusal ("" for a success).
	Message string
}

func (w childWrite) succeeded() bool { return w.Code >= 200 && w.Code < 300 }

func (w childWrite) String() string {
	s := w.Verb
	if w.Subresource != "" {
		s += " " + w.Subresource
	}
	s = fmt.Sprintf("%s at %s → %d", s, w.At.Format("15:04:05.000"), w.Code)
	if w.Message != "" {
		s += fmt.Sprintf(" %q", w.Message)
	}
	return s
}

// childWrites are one process's writes to the children of a namespace, by
// child key ("Sandbox task-07-sandbox"), in the order the apiserver
// logged them.
type childWrites map[string][]childWrite

func (cw childWrites) keys() []string {
	var keys []string
	for k := range cw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func refused(ws []childWrite) []childWrite {
	var out []childWrite
	for _, w := range ws {
		if !w.succeeded() {
			out = append(out, w)
		}
	}
	return out
}

// describe lists writes in order, runs of alike ones (same verb,
// subresource, answer) as one entry with their count and first and last
// times: a refused apply retried with backoff is one line, not twenty.
func describe(ws []childWrite) string {
	var parts []string
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && alike(ws[i], ws[j]) {
			j++
		}
		if n := j - i; n == 1 {
			parts = append(parts, ws[i].String())
		} else {
			last := ws[j-1]
			parts = append(parts, fmt.Sprintf("%d× %s (the last at %s)", n, ws[i], last.At.Format("15:04:05.000")))
		}
		i = j
	}
	return strings.Join(parts, "; ")
}

func alike(a, b childWrite) bool {
	return a.Verb == b.Verb && a.Subresource == b.Subresource && a.Code == b.Code && a.Message == b.Message
}

// writesByChild collects, from the audit log, the writes that the process
// holding credential sent to a Sandbox, ServiceAccount or NetworkPolicy of
// ns (and their subresources). messages gives refusals their reason.
func writesByChild(events []framework.AuditEvent, messages map[string]string, credential, ns string) childWrites {
	out := childWrites{}
	for _, e := range events {
		if e.CredentialID() != credential || !e.Write() || e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
			continue
		}
		kind, ok := childKinds[e.ObjectRef.Resource]
		if !ok || e.ObjectRef.Name == "" {
			continue
		}
		w := childWrite{Verb: e.Verb, Subresource: e.ObjectRef.Subresource, At: e.RequestReceived}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		if !e.Succeeded() {
			w.Message = messages[auditKey(e.RequestURI, e.RequestReceived)]
		}
		key := kind + " " + e.ObjectRef.Name
		out[key] = append(out[key], w)
	}
	return out
}

// writeSummary counts one process's writes by resource, and how many of
// them were refused: for the log, so that a reader sees what the new build
// did besides the children.
func writeSummary(events []framework.AuditEvent, credential string) string {
	type count struct{ all, refused int }
	by := map[string]*count{}
	for _, e := range events {
		if e.CredentialID() != credential || !e.Write() {
			continue
		}
		c := by[e.Resource()]
		if c == nil {
			c = &count{}
			by[e.Resource()] = c
		}
		c.all++
		if !e.Succeeded() {
			c.refused++
		}
	}
	var parts []string
	for r, c := range by {
		parts = append(parts, fmt.Sprintf("%s %d (%d refused)", r, c.all, c.refused))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// lastWrite is when the apiserver finished the last write of the process
// holding credential (zero when it wrote nothing).
func lastWrite(events []framework.AuditEvent, credential string) time.Time {
	var last time.Time
	for _, e := range events {
		if e.CredentialID() == credential && e.Write() && e.StageTimestamp.After(last) {
			last = e.StageTimestamp
		}
	}
	return last
}

// waitQuiet waits until the process holding credential has written
// nothing for quiet since since (it has done what it does on taking
// over), or until limit has passed since since: a write refused over and
// over never goes quiet, and the assertions then say what it was. It
// reports whether it went quiet, and the audit events as of then.
func waitQuiet(t *testing.T, credential string, since time.Time, quiet, limit time.Duration) ([]framework.AuditEvent, bool) {
	t.Helper()
	for {
		events, err := cluster.AuditEvents()
		if err != nil {
			t.Fatalf("reading the audit log: %v", err)
		}
		from := since
		if last := lastWrite(events, credential); last.After(from) {
			from = last
		}
		if time.Since(from) >= quiet {
			return events, true
		}
		if time.Since(since) >= limit {
			return events, false
		}
		time.Sleep(time.Second)
	}
}

// auditKey identifies one request in the audit log: its URI and when the
// apiserver received it.
func auditKey(uri string, received time.Time) string {
	return uri + " " + received.UTC().Format(time.RFC3339Nano)
}

// refusalMessages reads the apiserver's answers to refused requests from
// the audit log, by auditKey. framework.AuditEvent keeps only the code;
// the message says which field an apply broke.
func refusalMessages() (map[string]string, error) {
	f, err := os.Open(filepath.Join(cluster.LogsDir, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e struct {
			RequestURI      string    `json:"requestURI"`
			RequestReceived time.Time `json:"requestReceivedTimestamp"`
			ResponseStatus  *struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", sc.Text(), err)
		}
		if rs := e.ResponseStatus; rs != nil && (rs.Code < 200 || rs.Code >= 300) {
			msg := rs.Message
			if rs.Reason != "" {
				msg = rs.Reason + ": " + msg
			}
			out[auditKey(e.RequestURI, e.RequestReceived)] = msg
		}
	}
	return out, sc.Err()
}
