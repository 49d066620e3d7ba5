// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

func pinKeySecret(key []byte, created time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "caliban-pin-key", Namespace: "caliban-system", CreationTimestamp: metav1.NewTime(created)},
		Data:       map[string][]byte{PinKeyDataKey: key},
	}
}

func TestLoadPinKey(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	stored := bytes.Repeat([]byte{7}, 32)

	t.Run("an existing key is read with its Secret's creation time", func(t *testing.T) {
		kube := fake.NewClientset(pinKeySecret(stored, created))
		got, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		if err != nil || !bytes.Equal(got.Key, stored) || !got.Since.Equal(created) {
			t.Errorf("key %x since %s, err %v; want the stored key since %s", got.Key, got.Since, err, created)
		}
	})

	t.Run("a missing key is made: random, 32 bytes, and stored", func(t *testing.T) {
		kube := fake.NewClientset()
		got, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		if err != nil || len(got.Key) != 32 || bytes.Equal(got.Key, make([]byte, 32)) {
			t.Fatalf("key %x, err %v; want 32 random bytes", got.Key, err)
		}
		s, err := kube.CoreV1().Secrets("caliban-system").Get(ctx, "caliban-pin-key", metav1.GetOptions{})
		if err != nil || !bytes.Equal(s.Data[PinKeyDataKey], got.Key) {
			t.Errorf("stored %x, err %v; want the key returned", s.Data[PinKeyDataKey], err)
		}
		again, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		if err != nil || !bytes.Equal(again.Key, got.Key) {
			t.Errorf("a second start read %x, err %v; want the same key", again.Key, err)
		}
	})

	t.Run("a replica that loses the race to create it reads the winner's", func(t *testing.T) {
		kube := fake.NewClientset()
		kube.PrependReactor("create", "secrets", func(core.Action) (bool, runtime.Object, error) {
			// The other replica's Secret lands first.
			if err := kube.Tracker().Add(pinKeySecret(stored, created)); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), "caliban-pin-key")
		})
		got, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		if err != nil || !bytes.Equal(got.Key, stored) {
			t.Errorf("key %x, err %v; want the winner's", got.Key, err)
		}
	})

	t.Run("a short key is refused, naming the Secret and the setting", func(t *testing.T) {
		kube := fake.NewClientset(pinKeySecret([]byte("short"), created))
		_, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		for _, want := range []string{"caliban-system/caliban-pin-key", "CALIBAN_PIN_KEY_SECRET", "holds 5 bytes"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want it to say %q", err, want)
			}
		}
	})

	t.Run("a refused read stops the start, naming the Secret", func(t *testing.T) {
		kube := fake.NewClientset()
		kube.PrependReactor("get", "secrets", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "caliban-pin-key", nil)
		})
		_, err := LoadPinKey(ctx, kube.CoreV1(), "caliban-system", "caliban-pin-key")
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "caliban-system/caliban-pin-key") {
			t.Errorf("error %v, want the refusal, naming the Secret", err)
		}
	})
}
