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
	ch, err := loader.Load(filepath.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	if values == nil {
		values = map[string]any{}
	}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, values,
		common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, nil, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		docs, err := decodeYAML(files[name])
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", dir, name, err)
		}
		objs = append(objs, docs...)
	}
	return objs, nil
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
