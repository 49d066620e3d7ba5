// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The charts of charts/, relative to the repository root.
const (
	CRDsChart     = "charts/caliban-crds"
	OperatorChart = "charts/caliban-operator"
)

// RenderChart renders the chart in dir (relative to the repository root) as
// `helm template --namespace namespace` would for an install named release,
// with values over the chart's defaults. The values are checked against
// the chart's values.schema.json first, as every helm command does; a
// refusal is the error. NOTES.txt is left out.
func RenderChart(root, dir, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	objs, _, err := RenderChartOn(root, dir, release, namespace, values)
	return objs, err
}

// AdmissionPolicyKinds are the kinds the operator chart's admission
// component needs, as helm's capabilities name them: helm install asks the
// cluster whether it serves them, helm template without a cluster does not
// know.
var AdmissionPolicyKinds = []string{
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
	"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
}

// RenderChartOn is RenderChart on a cluster that also serves apiVersions
// (group/version or group/version/Kind, as helm's --api-versions): helm
// template without a cluster knows only the group versions of its client
// library, never a kind. It also returns the rendered NOTES.txt.
func RenderChartOn(root, dir, release, namespace string, values map[string]any, apiVersions ...string) ([]*unstructured.Unstructured, string, error) {
	ch, err := loader.Load(filepath.Join(root, dir))
	if err != nil {
		return nil, "", fmt.Errorf("loading chart %s: %w", dir, err)
	}
	if values == nil {
		values = map[string]any{}
	}
	caps := common.DefaultCapabilities.Copy()
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apiVersions...)
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, values,
		common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		return nil, "", err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, "", fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	var notes string
	for name := range files {
		switch {
		case strings.HasSuffix(name, "/NOTES.txt"):
			notes = files[name]
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		docs, err := decodeYAML(files[name])
		if err != nil {
			return nil, "", fmt.Errorf("chart %s: %s: %w", dir, name, err)
		}
		objs = append(objs, docs...)
	}
	return objs, notes, nil
}

// decodeYAML reads every non-empty document of a YAML stream, through JSON
// as Kustomize does, so that integers are int64 in both.
func decodeYAML(text string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if t := bytes.TrimSpace(data); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
}
