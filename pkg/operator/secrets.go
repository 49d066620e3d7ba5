// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// secretGetter reads Secrets by GET: the operator may not list or watch
// them. Not found is an answer (nil), not an error. Both controllers read
// Secrets this way: Workspace credentials, a task's state token.
func secretGetter(ctx context.Context, kube kubernetes.Interface, namespace string) builders.SecretGetter {
	return func(name string) (*corev1.Secret, error) {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return s, err
	}
}
