// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// operatorAuditPolicy logs, at Metadata level, what the operator's
// ServiceAccount sends, but single-object reads (the leader election's
// polls would drown the rest); everybody else's requests are left out.
const operatorAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get]
- level: Metadata
  users: ["system:serviceaccount:` + OperatorNamespace + `:` + OperatorServiceAccount + `"]
- level: None
`

// credentialIDKey is where the apiserver records, in an audit event, which
// token authenticated the request.
const credentialIDKey = "authentication.kubernetes.io/credential-id"

// AuditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	Stage      string `json:"stage"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// CredentialID is the id of the token that sent the request, as
// CredentialID(kubeconfig) returns it.
func (e AuditEvent) CredentialID() string {
	if ids := e.User.Extra[credentialIDKey]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// Write reports whether the request was sent to change something.
func (e AuditEvent) Write() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Succeeded reports whether the apiserver answered with a 2xx.
func (e AuditEvent) Succeeded() bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// Resource is "resource" or "resource/subresource".
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// AuditEvents reads the audit log of a cluster started with
// Options.AuditOperator, in the order the apiserver logged it: each request
// once it completed (stage ResponseComplete, or Panic), and each
// long-running one (a watch) also when it started (ResponseStarted), since
// a watch still open has no other record.
func (c *Cluster) AuditEvents() ([]AuditEvent, error) {
	if !c.opts.AuditOperator {
		return nil, fmt.Errorf("cluster %s was started without Options.AuditOperator", c.Name)
	}
	f, err := os.Open(filepath.Join(c.LogsDir, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var events []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", sc.Text(), err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" || e.Stage == "ResponseStarted" {
			events = append(events, e)
		}
	}
	return events, sc.Err()
}

// CredentialID is the id under which the apiserver's audit log records the
// requests sent with the bearer token in kubeconfig ("JTI=<the token's
// jti claim>"), which tells apart two processes that share a
// ServiceAccount but not a token.
func CredentialID(kubeconfig string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if auth == nil || auth.Token == "" {
		return "", fmt.Errorf("%s has no bearer token", kubeconfig)
	}
	parts := strings.Split(auth.Token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("the token in %s is not a JWT", kubeconfig)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("the token in %s: %w", kubeconfig, err)
	}
	var claims struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
		return "", fmt.Errorf("the token in %s has no jti claim (%v)", kubeconfig, err)
	}
	return "JTI=" + claims.JTI, nil
}
