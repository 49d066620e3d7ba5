// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// FieldManager is the field manager tests write with, distinct from the
// operator's.
const FieldManager = "caliban-test"

var getOpts = metav1.GetOptions{}

// InstallCRDs applies every CRD in the given directories and waits until
// each is Established.
func (c *Cluster) InstallCRDs(ctx context.Context, dirs ...string) error {
	var names []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(data, crd); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
			body, err := yaml.YAMLToJSON(data)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if _, err := c.APIExt.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name,
				types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)}); err != nil {
				return fmt.Errorf("applying CRD %s from %s: %w", crd.Name, f, err)
			}
			names = append(names, crd.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no CRDs found in %v", dirs)
	}
	for _, name := range names {
		if err := c.waitEstablished(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitEstablished(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		crd, err := c.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, getOpts)
		if err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s never became Established (last error: %v)", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Namespace creates a namespace for one test, with the given labels, and
// deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	name := "t-" + utilrand.String(8)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// ReadManifests decodes every document of the YAML files in dir, in file
// name order.
func ReadManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// Apply server-side-applies objects, in order, into namespace (for
// namespaced kinds that name none) with strict field validation, so a typo in
// a manifest fails rather than being pruned.
func (c *Cluster) Apply(ctx context.Context, namespace string, objs ...*unstructured.Unstructured) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		ri := c.Dynamic.Resource(mapping.Resource)
		opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
		var applyErr error
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			obj = obj.DeepCopy()
			obj.SetNamespace(ns)
			_, applyErr = applyStrict(ctx, ri.Namespace(ns), obj, opts)
		} else {
			_, applyErr = applyStrict(ctx, ri, obj, opts)
		}
		if applyErr != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), applyErr)
		}
	}
	return nil
}

// Remove deletes objects as `kubectl delete` would, in reverse order; an
// object already gone is not an error.
func (c *Cluster) Remove(ctx context.Context, objs ...*unstructured.Unstructured) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

type applier interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
}

func applyStrict(ctx context.Context, ri applier, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager:    opts.FieldManager,
		Force:           &opts.Force,
		FieldValidation: "Strict",
	})
}

// Eventually polls f every 100ms until it returns nil or timeout passes,
// then fails the test with f's last error.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// IsInvalid reports whether err is the apiserver's 422 Invalid answer and
// every want string appears in its message.
func IsInvalid(err error, want ...string) error {
	return answered(err, apierrors.IsInvalid, "an Invalid error", want)
}

// IsForbidden reports whether err is the apiserver's 403 Forbidden answer
// (RBAC's or an admission policy's) and every want string appears in its
// message.
func IsForbidden(err error, want ...string) error {
	return answered(err, apierrors.IsForbidden, "a Forbidden refusal", want)
}

func answered(err error, is func(error) bool, kind string, want []string) error {
	if err == nil {
		return errors.New("the apiserver accepted the request")
	}
	if !is(err) {
		return fmt.Errorf("want %s, got %v", kind, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			return fmt.Errorf("error %q does not mention %q", err.Error(), w)
		}
	}
	return nil
}
