package admissionpolicy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The rights to create and restore these objects are in
// config/rbac/bootstrap_role.yaml, apart from the manager's role.

// Ensure creates each of Objects that does not exist yet. An object that
// exists is left as it is, so that an administrator's edits stay. The
// operator calls it at start: OLM bundles cannot carry these kinds.
//
// c must read from the API server, not from a cache that is not started
// yet, and its scheme must know admissionregistration.k8s.io/v1.
func Ensure(ctx context.Context, c client.Client) error {
	for _, obj := range Objects() {
		if err := ensure(ctx, c, obj); err != nil {
			return err
		}
	}
	return nil
}

func ensure(ctx context.Context, c client.Client, obj client.Object) error {
	kind, name := obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName()
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%s %s: cannot copy the object", kind, name)
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting %s %s: %w", kind, name, err)
	}
	switch err := c.Create(ctx, obj, client.FieldOwner(v1alpha1.FieldManager)); {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating %s %s: %w", kind, name, err)
	}
	logf.FromContext(ctx).Info("admission object created", "kind", kind, "name", name)
	return nil
}

// EnsureObjects creates each of objs that does not exist yet, as Ensure
// does for Objects. It creates copies: objs keep their kinds.
func EnsureObjects(ctx context.Context, c client.Client, objs []client.Object) error {
	for _, obj := range objs {
		if err := ensure(ctx, c, obj.DeepCopyObject().(client.Object)); err != nil {
			return err
		}
	}
	return nil
}
