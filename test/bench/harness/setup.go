// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/caliban-ai/caliban-operator/test/framework"
)

// installOperatorRBAC applies manifests/base as `kubectl apply -k` would,
// except the Deployment (nothing here runs its image; the binary runs as a
// process instead), and returns the RBAC rules it grants the operator, for
// the per-resource FlowSchemas.
func (b *bench) installOperatorRBAC(ctx context.Context) ([]rbacv1.PolicyRule, error) {
	all, err := framework.Kustomize(b.cluster.Root, filepath.Join("manifests", "base"))
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	var rules []rbacv1.PolicyRule
	for _, u := range all {
		switch u.GetKind() {
		case "Deployment":
			continue
		case "ClusterRole", "Role":
			var role rbacv1.ClusterRole // a Role's rules have the same shape
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			rules = append(rules, role.Rules...)
		}
		objs = append(objs, u)
	}
	if err := b.cluster.Apply(ctx, "", objs...); err != nil {
		return nil, err
	}
	return rules, nil
}

// APF objects that attribute the operator's requests on the apiserver.
const (
	priorityLevel = "bench-operator"
	// writesSchema and readsSchema catch whatever the per-resource schemas
	// do not: verbs or resources outside the operator's RBAC (refused, but
	// still requests), discovery and other non-resource reads.
	writesSchema = "bench-operator-writes"
	readsSchema  = "bench-operator-reads"
	// The per-resource schemas come first; the two catch-alls last.
	firstPrecedence = 500
)

var (
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
	readVerbs  = []string{"get", "list", "watch"}
)

// flowSchema is what one of the benchmark's FlowSchemas counts.
type flowSchema struct {
	name string
	// verb and resource ("group/resource[/subresource]", "" for a
	// catch-all) label the breakdown.
	verb, resource string
	write          bool
}

// installFlowSchemas creates a Limited priority level with generous shares
// and, pointing at it, FlowSchemas whose subject is the operator's
// ServiceAccount: one per verb and resource its RBAC grants (for the
// breakdown), then one catch-all for the write verbs and one for the read
// verbs (resource and non-resource). The apiserver counts the requests
// dispatched under each schema in
// apiserver_flowcontrol_dispatched_requests_total, so the operator's
// requests are counted where they land, whatever the operator thinks it
// sent. It waits until the apiserver has taken every schema in.
func (b *bench) installFlowSchemas(ctx context.Context, rules []rbacv1.PolicyRule) ([]flowSchema, error) {
	fc := b.admin.FlowcontrolV1()
	plc := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: priorityLevel},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				// Shares on a par with workload-low (100), the level the
				// operator's requests would otherwise get, so attributing them
				// does not throttle them.
				NominalConcurrencyShares: new(int32(100)),
				LendablePercent:          new(int32(0)),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{
						Queues: 64, HandSize: 6, QueueLengthLimit: 50,
					},
				},
			},
		},
	}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, plc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating PriorityLevelConfiguration %s: %w", priorityLevel, err)
	}

	subject := flowcontrolv1.Subject{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: framework.OperatorNamespace, Name: framework.OperatorServiceAccount},
	}
	var schemas []flowSchema
	var objs []*flowcontrolv1.FlowSchema
	add := func(fs flowSchema, rule flowcontrolv1.PolicyRulesWithSubjects) {
		rule.Subjects = []flowcontrolv1.Subject{subject}
		schemas = append(schemas, fs)
		objs = append(objs, &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: fs.name},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: priorityLevel},
				MatchingPrecedence:         int32(firstPrecedence + len(objs)),
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
			},
		})
	}
	seen := map[string]bool{}
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, resource := range r.Resources {
				for _, verb := range r.Verbs {
					gr := resource
					if group != "" {
						gr = group + "/" + resource
					}
					name := "bench-op-" + verb + "-" + strings.NewReplacer("/", "-", ".", "-").Replace(gr)
					if seen[name] || strings.Contains(verb+group+resource, "*") {
						continue
					}
					seen[name] = true
					add(flowSchema{name: name, verb: verb, resource: gr, write: slices.Contains(writeVerbs, verb)},
						flowcontrolv1.PolicyRulesWithSubjects{ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
							Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource},
							ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
						}}})
				}
			}
		}
	}
	add(flowSchema{name: writesSchema, verb: "(other writes)", write: true},
		flowcontrolv1.PolicyRulesWithSubjects{ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: writeVerbs, APIGroups: []string{flowcontrolv1.APIGroupAll}, Resources: []string{flowcontrolv1.ResourceAll},
			ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
		}}})
	add(flowSchema{name: readsSchema, verb: "(other reads)"},
		flowcontrolv1.PolicyRulesWithSubjects{
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: readVerbs, APIGroups: []string{flowcontrolv1.APIGroupAll}, Resources: []string{flowcontrolv1.ResourceAll},
				ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
			}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
				Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
			}},
		})
	for _, fs := range objs {
		if _, err := fc.FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating FlowSchema %s: %w", fs.Name, err)
		}
	}

	// The apiserver's APF configuration controller marks each schema it
	// took in with Dangling=False (its priority level exists).
	deadline := time.Now().Add(time.Minute)
	for _, fs := range objs {
		for {
			got, err := fc.FlowSchemas().Get(ctx, fs.Name, metav1.GetOptions{})
			if err == nil && slices.ContainsFunc(got.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) bool {
				return c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == flowcontrolv1.ConditionFalse
			}) {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the apiserver never took FlowSchema %s in (last error: %v)", fs.Name, err)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return schemas, nil
}

// apfCounts is apiserver_flowcontrol_dispatched_requests_total by flow
// schema, for the benchmark's schemas.
type apfCounts map[string]float64

// apiserverFlows scrapes the apiserver's /metrics for the requests
// dispatched under each FlowSchema of the benchmark.
func (b *bench) apiserverFlows(ctx context.Context) (apfCounts, error) {
	body, err := b.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	m, err := parseMetrics(string(body), apfDispatched)
	if err != nil {
		return nil, err
	}
	out := apfCounts{}
	for fs, v := range m.by(apfDispatched, map[string]string{"priority_level": priorityLevel}, "flow_schema") {
		out[fs] = v
	}
	return out, nil
}

// apiserverProfile saves a CPU profile of the kube-apiserver over the next
// secs seconds to path, from its /debug/pprof (on by default; the admin
// client may read it).
func (b *bench) apiserverProfile(ctx context.Context, secs int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	body, err := b.admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(secs)).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("apiserver /debug/pprof/profile: %w", err)
	}
	return os.WriteFile(path, body, 0o644)
}

const apfDispatched = "apiserver_flowcontrol_dispatched_requests_total"

// totals is the change of the operator's requests between two scrapes:
// all, writes and reads.
type totals struct {
	requests, writes, reads float64
	// eventWrites are the writes of Events, part of writes.
	eventWrites float64
	bySchema    map[string]float64
}

func (b *bench) totals(before, after apfCounts) totals {
	d := delta(before, after)
	t := totals{bySchema: d}
	for _, fs := range b.schemas {
		v := d[fs.name]
		t.requests += v
		if fs.write {
			t.writes += v
			if strings.HasSuffix(fs.resource, "/events") || fs.resource == "events" {
				t.eventWrites += v
			}
		} else {
			t.reads += v
		}
	}
	return t
}
