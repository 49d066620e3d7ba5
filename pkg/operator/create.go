// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/caliban-ai/caliban-operator/pkg/builders"
	"github.com/caliban-ai/caliban-operator/pkg/operator/tracing"
)

// A name the operator gives an object is taken, never shared
// (docs/adr/0029-a-name-is-taken-not-shared.md). A forced apply writes over
// whatever holds the name, and every child of every task is applied by the
// same field manager, so one task's apply would make another task's child
// its own, and an apply over an object someone else made would take it. So
// the first write of each object the operator names is a create, which the
// apiserver refuses when the name is held; only an object this owner
// controls is applied over.

// errNameTaken is what a name held by another object is: the object and
// its holder, said in the status of the task or Workspace that wanted it.
type errNameTaken struct {
	message string
}

func (e *errNameTaken) Error() string { return e.message }

// nameTaken is the error for object name of kind, wanted by owner and held
// by holder (as the cache or the apiserver has it).
func nameTaken(kind, name string, holder metav1.Object) error {
	return &errNameTaken{message: builders.NameTakenMessage(kind, name, holder)}
}

// takenBy is the errNameTaken in err's chain, or nil.
func takenBy(err error) *errNameTaken {
	var taken *errNameTaken
	if errors.As(err, &taken) {
		return taken
	}
	return nil
}

// target is an object the operator names, and how to create and read it.
type target struct {
	// kind and name name it in messages.
	kind, name string
	// create creates it, recording the write in the sync's span.
	create func(ctx context.Context) error
	// get reads it from the apiserver.
	get func(ctx context.Context) (metav1.Object, error)
}

// createOrFind makes the first write of t for its owner, the object whose
// UID is owner: its create. It reports created when the create made it.
// When the name is held, it reads the holder: an object the owner controls
// (the cache had not brought it yet) is the owner's to apply over,
// reported as not created and no error; anything else is errNameTaken, and
// nothing is written to it. The UID alone names the owner: no other object
// has it.
func createOrFind(ctx context.Context, t target, owner types.UID) (created bool, err error) {
	klog.FromContext(ctx).V(4).Info("Creating", "kind", t.kind, "name", t.name)
	err = t.create(ctx)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	live, err := t.get(ctx)
	if err != nil {
		// Gone again since the create: the next sync creates it.
		return false, fmt.Errorf("reading %s %s, whose name is held: %w", t.kind, t.name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref == nil || ref.UID != owner {
		return false, nameTaken(t.kind, t.name, live)
	}
	return false, nil
}

// typedClient is what createOrFind needs of a generated typed client.
type typedClient[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

var createOptions = metav1.CreateOptions{FieldManager: builders.FieldManager}

// typedTarget is the target of object name through client, created from
// body, the apply configuration an apply would send, decoded into a new
// object; into, if not nil, receives the created object.
func typedTarget[T metav1.Object](write, kind, name string, client typedClient[T], body runtime.ApplyConfiguration, newObject func() T, into *T) target {
	return target{kind: kind, name: name,
		create: func(ctx context.Context) error {
			data, err := json.Marshal(body)
			if err != nil {
				return fmt.Errorf("encoding %s %s: %w", kind, name, err)
			}
			obj := newObject()
			if err := json.Unmarshal(data, obj); err != nil {
				return fmt.Errorf("encoding %s %s: %w", kind, name, err)
			}
			created, err := client.Create(ctx, obj, createOptions)
			if err != nil {
				return err
			}
			tracing.RecordWrite(ctx, write)
			if into != nil {
				*into = created
			}
			return nil
		},
		get: func(ctx context.Context) (metav1.Object, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
	}
}

// restCreate creates body as object name of resource in namespace through
// rc, without decoding the answer (applyUnread's reasons).
func restCreate(ctx context.Context, write string, rc rest.Interface, resource, namespace, name string, body runtime.ApplyConfiguration) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the create of %s: %w", name, err)
	}
	err = rc.Post().Namespace(namespace).Resource(resource).Param("fieldManager", builders.FieldManager).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(data).Do(ctx).Error()
	if err == nil {
		tracing.RecordWrite(ctx, write)
	}
	return err
}

// ownAsApplied makes the operator's fields of live, created by a create
// (an Update entry in its managed fields), owned by its applies, so that
// an apply that leaves a field out removes it (builders.AppliedOwnership).
// It does nothing for an object the operator never created. A live object
// that changed since it was read fails the patch's test, and the sync is
// retried.
func ownAsApplied(ctx context.Context, rc rest.Interface, resource string, live metav1.Object) error {
	patch, ok, err := builders.AppliedOwnership(live)
	if err != nil || !ok {
		return err
	}
	err = rc.Patch(types.JSONPatchType).Namespace(live.GetNamespace()).Resource(resource).Name(live.GetName()).
		Body(patch).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("moving the operator's fields of %s %s to its applies: %w", resource, live.GetName(), err)
	}
	tracing.RecordWrite(ctx, writeOwnership)
	return nil
}
