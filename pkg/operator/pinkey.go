// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
)

// PinKeyDataKey is the key of the pin key Secret's data that holds the key.
const PinKeyDataKey = "key"

// pinKeySize is the key's length in bytes: HMAC-SHA256's output size, the
// least RFC 2104 recommends.
const pinKeySize = 32

// LoadPinKey reads the operator's pin signing key from Secret
// namespace/name, creating it with a fresh random key when it does not
// exist (the first start of an operator that signs). Replicas that race to
// create it read whichever won. The Secret's creationTimestamp is the key's
// Since: tasks created before it were pinned by an operator that did not
// sign (docs/adr/0024-pins-the-operator-wrote.md).
func LoadPinKey(ctx context.Context, secrets corev1client.SecretsGetter, namespace, name string) (builders.PinKey, error) {
	where := fmt.Sprintf("the pin key Secret %s/%s (CALIBAN_PIN_KEY_SECRET)", namespace, name)
	secret, err := secrets.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, pinKeySize)
		if _, err := rand.Read(key); err != nil {
			return builders.PinKey{}, fmt.Errorf("making a key for %s: %w", where, err)
		}
		secret, err = secrets.Secrets(namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{builders.LabelName: "caliban-operator"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{PinKeyDataKey: key},
		}, metav1.CreateOptions{FieldManager: builders.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			secret, err = secrets.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		if err == nil {
			klog.FromContext(ctx).Info("Created the pin signing key", "secret", klog.KObj(secret))
		}
	}
	if err != nil {
		return builders.PinKey{}, fmt.Errorf("reading %s: %w", where, err)
	}
	key := secret.Data[PinKeyDataKey]
	if len(key) < pinKeySize {
		return builders.PinKey{}, fmt.Errorf("%s holds %d bytes under %q; it needs at least %d (delete it, and the operator makes a new one)",
			where, len(key), PinKeyDataKey, pinKeySize)
	}
	return builders.PinKey{Key: key, Since: secret.CreationTimestamp.Time}, nil
}
