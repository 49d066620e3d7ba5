// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package codegen_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/test/framework"
)

// field is what docs/crd-reference.md (#spec for Workspace, #spec-1 for
// CalibanTask) says about one field of a CRD schema.
type field struct {
	typ       string
	required  bool
	def       string // the default as JSON, "" for none
	enum      []string
	minLength int64
	minimum   float64
	minItems  int64
}

// TestCRDSchemasFollowTheSpec walks every field docs/crd-reference.md names
// (#spec and #spec-1). Paths use "[]" for list items.
func TestCRDSchemasFollowTheSpec(t *testing.T) {
	workspace := map[string]field{
		"spec":                                       {typ: "object", required: true},
		"spec.displayName":                           {typ: "string", required: true, minLength: 1},
		"spec.sources":                               {typ: "array", def: "[]"},
		"spec.sources[].name":                        {typ: "string", required: true, minLength: 1},
		"spec.sources[].repo":                        {typ: "string", required: true, minLength: 1},
		"spec.sources[].ref":                         {typ: "string", def: `"main"`},
		"spec.sources[].path":                        {typ: "string", required: true, minLength: 1},
		"spec.sources[].credentialsRef":              {typ: "object"},
		"spec.sources[].credentialsRef.secretName":   {typ: "string", required: true, minLength: 1},
		"spec.providers":                             {typ: "array", required: true, minItems: 1},
		"spec.providers[].name":                      {typ: "string", required: true, minLength: 1},
		"spec.providers[].kind":                      {typ: "string", required: true, minLength: 1},
		"spec.providers[].baseUrl":                   {typ: "string"},
		"spec.providers[].model":                     {typ: "string"},
		"spec.providers[].credentialsRef":            {typ: "object"},
		"spec.providers[].credentialsRef.secretName": {typ: "string", required: true, minLength: 1},
		"spec.providers[].credentialsRef.key":        {typ: "string", required: true, minLength: 1},
		"spec.defaultProvider":                       {typ: "string"},
		"spec.env":                                   {typ: "array", def: "[]"},
		"spec.env[].name":                            {typ: "string", required: true, minLength: 1},
		"spec.env[].value":                           {typ: "string"},
		"spec.isolation.runtimeClass":                {typ: "string"},
		"spec.isolation.worktrees":                   {typ: "string"},
		"spec.egress":                                {typ: "object"},
		"spec.egress.allow":                          {typ: "array", def: "[]"},
		"spec.egress.allow[].cidr":                   {typ: "string", required: true, minLength: 1},
		"spec.egress.allow[].ports":                  {typ: "array"},
		"spec.agentPolicy":                           {typ: "object"},
		"spec.agentPolicy.allowUnattended":           {typ: "boolean", def: "false"},
		"spec.agentPolicy.permissionMode":            {typ: "string", enum: []string{"default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"}},
		"spec.agentPolicy.autoAllow":                 {typ: "boolean"},
		"spec.agentPolicy.noPermissions":             {typ: "boolean"},
		"spec.agentPolicy.noMcp":                     {typ: "boolean"},
		"spec.agentPolicy.noHooks":                   {typ: "boolean"},
		"spec.agentPolicy.noSkills":                  {typ: "boolean"},
		"spec.agentPolicy.noSubAgent":                {typ: "boolean"},
		"spec.agentPolicy.strictKnownMarketplaces":   {typ: "boolean"},
		"spec.agentPolicy.enabledPlugins":            {typ: "array"},
		"spec.agentPolicy.blockedMarketplaces":       {typ: "array"},
		"spec.agentPolicy.parallelToolLimit":         {typ: "integer", minimum: 1},
		"spec.warmPool":                              {typ: "object"},
		"spec.warmPool.replicas":                     {typ: "integer", minimum: 0},
		"status.warmPool.replicas":                   {typ: "integer"},
		"status.warmPool.readyReplicas":              {typ: "integer"},
		"status.warmPool.template":                   {typ: "string"},
		"status.phase":                               {typ: "string", enum: []string{"Pending", "Ready", "Failed"}},
		"status.message":                             {typ: "string"},
		"status.observedGeneration":                  {typ: "integer"},
		"status.conditions":                          {typ: "array"},
	}
	task := map[string]field{
		"spec":                                                 {typ: "object", required: true},
		"spec.workspaceRef":                                    {typ: "object", required: true},
		"spec.workspaceRef.name":                               {typ: "string", required: true, minLength: 1},
		"spec.providerRef":                                     {typ: "string"},
		"spec.task":                                            {typ: "object", required: true},
		"spec.task.prompt":                                     {typ: "string", required: true, minLength: 1},
		"spec.task.agentType":                                  {typ: "string"},
		"spec.task.interactive":                                {typ: "boolean", def: "false"},
		"spec.task.permissionPosture":                          {typ: "string", def: `"supervised"`, enum: []string{"supervised", "unattended"}},
		"spec.model.name":                                      {typ: "string", minLength: 1},
		"spec.model.routerConfigRef":                           {typ: "string"},
		"spec.state.gonzaloEndpoint":                           {typ: "string"},
		"spec.state.mode":                                      {typ: "string", enum: []string{"remote", "local"}},
		"spec.state.tokenRef.secretName":                       {typ: "string", required: true, minLength: 1},
		"spec.state.tokenRef.key":                              {typ: "string", required: true, minLength: 1},
		"spec.isolation.runtimeClass":                          {typ: "string"},
		"spec.isolation.worktrees":                             {typ: "string"},
		"spec.resources.class":                                 {typ: "string"},
		"spec.lifecycle.idleTimeout":                           {typ: "string"},
		"spec.lifecycle.onDelete":                              {typ: "string"},
		"spec.lifecycle.onFinish":                              {typ: "string", enum: []string{"suspend", "keep"}},
		"spec.lifecycle.ttlSecondsAfterFinished":               {typ: "integer"},
		"spec.lifecycle.activeDeadlineSeconds":                 {typ: "integer", minimum: 1},
		"spec.suspend":                                         {typ: "boolean", def: "false"},
		"spec.tools":                                           {typ: "array"},
		"status.phase":                                         {typ: "string", enum: []string{"Pending", "Provisioning", "Running", "Suspended", "Draining", "Completed", "Failed"}},
		"status.startTime":                                     {typ: "string"},
		"status.completionTime":                                {typ: "string"},
		"status.calibandEndpoint":                              {typ: "string"},
		"status.sandboxRef.name":                               {typ: "string", required: true},
		"status.resolvedWorkspace":                             {typ: "object"},
		"status.resolvedWorkspace.sources":                     {typ: "array"},
		"status.resolvedWorkspace.provider.credentialsRef.key": {typ: "string", required: true, minLength: 1},
		"status.resolvedWorkspace.env":                         {typ: "array"},
		"status.resolvedWorkspace.isolation.runtimeClass":      {typ: "string"},
		"status.resolvedWorkspace.egress.allow":                {typ: "array", def: "[]"},
		"status.resolvedWorkspace.agentPolicy.allowUnattended": {typ: "boolean", def: "false"},
		"status.permissionPosture":                             {typ: "string", enum: []string{"supervised", "unattended"}},
		"status.observedGeneration":                            {typ: "integer"},
		"status.checkpointRef":                                 {typ: "string"},
		"status.launch.type":                                   {typ: "string", required: true, enum: []string{"Warm", "Cold"}},
		"status.launch.reason":                                 {typ: "string"},
		"status.launch.message":                                {typ: "string"},
		"status.launch.claim.name":                             {typ: "string", required: true},
		"status.launch.claim.uid":                              {typ: "string", required: true},
		"status.conditions":                                    {typ: "array"},
		"status.conditions[].type":                             {typ: "string", required: true},
		"status.conditions[].status":                           {typ: "string", required: true, enum: []string{"True", "False", "Unknown"}},
		"status.conditions[].reason":                           {typ: "string", required: true, minLength: 1},
		"status.conditions[].lastTransitionTime":               {typ: "string", required: true},
		// prospero's AgentsSettled carries no message.
		"status.conditions[].message": {typ: "string", required: false},
	}
	for crd, fields := range map[string]map[string]field{
		"caliban.caliban-ai.dev_workspaces.yaml":   workspace,
		"caliban.caliban-ai.dev_calibantasks.yaml": task,
	} {
		schema := loadSchema(t, crd)
		for path, want := range fields {
			t.Run(crd+" "+path, func(t *testing.T) {
				got, required, ok := lookup(schema, path)
				if !ok {
					t.Fatalf("%s is not in the schema", path)
				}
				gotField := field{typ: got.Type, required: required, enum: enumStrings(got.Enum)}
				if got.Default != nil {
					gotField.def = string(got.Default.Raw)
				}
				if got.MinLength != nil {
					gotField.minLength = *got.MinLength
				}
				if got.Minimum != nil {
					gotField.minimum = *got.Minimum
				}
				if got.MinItems != nil {
					gotField.minItems = *got.MinItems
				}
				if diff := cmp.Diff(want, gotField, cmp.AllowUnexported(field{})); diff != "" {
					t.Errorf("(-spec +schema):\n%s", diff)
				}
			})
		}
	}
}

func TestConditionListsAreMapsKeyedByType(t *testing.T) {
	for _, crd := range []string{"caliban.caliban-ai.dev_workspaces.yaml", "caliban.caliban-ai.dev_calibantasks.yaml"} {
		s, _, ok := lookup(loadSchema(t, crd), "status.conditions")
		if !ok {
			t.Fatalf("%s: no status.conditions", crd)
		}
		if s.XListType == nil || *s.XListType != "map" || !cmp.Equal(s.XListMapKeys, []string{"type"}) {
			t.Errorf("%s: status.conditions list type %v keys %v, want map keyed by type", crd, s.XListType, s.XListMapKeys)
		}
	}
}

// TestTheSchemaRefusesTheReservedNames keeps the Workspace env rules,
// literal lists in markers, and the operator's lists of its own variables,
// caliband's worker variables, the agent policy's variables (with the
// field each message names) and the variables that load code the same.
func TestTheSchemaRefusesTheReservedNames(t *testing.T) {
	entry, _, ok := lookup(loadSchema(t, "caliban.caliban-ai.dev_workspaces.yaml"), "spec.env[]")
	if !ok {
		t.Fatal("no spec.env entries in the Workspace schema")
	}
	var rules []string
	for _, v := range entry.XValidations {
		rules = append(rules, v.Rule)
	}
	var policyNames, policyFields []string
	for _, v := range builders.AgentPolicyVariables {
		policyNames = append(policyNames, v.Name)
		policyFields = append(policyFields, "'"+v.Name+"': '"+v.Field+"'")
	}
	var want []string
	for _, names := range [][]string{builders.OperatorEnvNames, builders.WorkerEnvNames, policyNames} {
		want = append(want, "!(self.name in ['"+strings.Join(names, "', '")+"'])")
	}
	var loaders, prefixes []string
	for _, n := range builders.LoaderEnvNames {
		loaders = append(loaders, "'"+n+"': true")
	}
	for _, p := range builders.LoaderEnvPrefixes {
		prefixes = append(prefixes, "!self.name.startsWith('"+p+"')")
	}
	want = append(want, "!(self.name in {"+strings.Join(loaders, ", ")+"})", strings.Join(prefixes, " && "))
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("the rules on a spec.env entry (-want +got):\n%s", diff)
	}
	if len(entry.XValidations) != len(want) {
		return
	}
	wantMessage := "self.name + ' is projected from ' + {" + strings.Join(policyFields, ", ") + "}[self.name] + ' and cannot be set in a Workspace; set that field instead'"
	if diff := cmp.Diff(wantMessage, entry.XValidations[2].MessageExpression); diff != "" {
		t.Errorf("the agent policy rule's message (-want +got):\n%s", diff)
	}
	// Both loader rules answer as Workspace validation does, about the name.
	for _, v := range entry.XValidations[3:] {
		if want := "self.name + ' decides what code the agent pod loads or runs, and cannot be set in a Workspace'"; v.MessageExpression != want || v.FieldPath != ".name" {
			t.Errorf("rule %q: message %q at %q, want %q at .name", v.Rule, v.MessageExpression, v.FieldPath, want)
		}
	}
}

// TestTheSecretRefsPolicyGatesTheRepointingNames keeps the admission
// component's list of the env variables that re-point provider keys, a
// literal copy in manifests/admission (and the chart, which
// test/charts holds to it), and the operator's the same.
func TestTheSecretRefsPolicyGatesTheRepointingNames(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "admission", "secret-refs-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	doc, _, _ := strings.Cut(string(data), "\n---\n")
	if err := yaml.UnmarshalStrict([]byte(doc), policy); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range policy.Spec.Variables {
		got[v.Name] = v.Expression
	}
	list := func(names []string) string { return "['" + strings.Join(names, "', '") + "']" }
	for name, want := range map[string]string{
		"repointingNames":    list(builders.RepointingEnvNames),
		"repointingSuffixes": list(builders.RepointingEnvSuffixes),
	} {
		if diff := cmp.Diff(want, got[name]); diff != "" {
			t.Errorf("variable %s of %s (-want +got):\n%s", name, policy.Name, diff)
		}
	}
}

func loadSchema(t *testing.T, file string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("%s: want exactly version v1alpha1", file)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// lookup follows a dotted path ("a.b[].c") and reports the schema found and
// whether its parent lists it as required.
func lookup(s *apiextensionsv1.JSONSchemaProps, path string) (*apiextensionsv1.JSONSchemaProps, bool, bool) {
	required := false
	for _, part := range strings.Split(path, ".") {
		items := strings.HasSuffix(part, "[]")
		name := strings.TrimSuffix(part, "[]")
		child, ok := s.Properties[name]
		if !ok {
			return nil, false, false
		}
		required = slices.Contains(s.Required, name)
		s = &child
		if items {
			if s.Items == nil || s.Items.Schema == nil {
				return nil, false, false
			}
			s = s.Items.Schema
		}
	}
	return s, required, true
}

func enumStrings(enum []apiextensionsv1.JSON) []string {
	var out []string
	for _, e := range enum {
		var v string
		_ = json.Unmarshal(e.Raw, &v)
		out = append(out, v)
	}
	return out
}
