package flowcontrol

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The rights to create these objects are in config/rbac/bootstrap_role.yaml.

// Ensure creates each of the objects of Objects that does not exist yet, for
// the service account the client authenticates as. An object that exists is
// left as it is, so that an administrator's edits stay. The operator calls it
// at start: OLM bundles cannot carry these kinds.
//
// It asks the API server who the client is (a SelfSubjectReview, which
// every authenticated user may create). A client that is not a service
// account, as when the manager runs outside the cluster with a person's
// credentials, gets no FlowSchema: Ensure returns false and creates nothing;
// otherwise it returns true once both objects exist.
//
// c must read from the API server, not from a cache that is not started
// yet, and its scheme must know flowcontrol.apiserver.k8s.io/v1.
func Ensure(ctx context.Context, c client.Client) (bool, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking the API server who the operator is: %w", err)
	}
	user := review.Status.UserInfo.Username
	namespace, name, err := serviceaccount.SplitUsername(user)
	if err != nil {
		logf.FromContext(ctx).Info("not running as a service account: no FlowSchema created", "user", user)
		return false, nil
	}
	for _, obj := range Objects(namespace, name) {
		if err := ensure(ctx, c, obj, namespace, name); err != nil {
			return false, err
		}
	}
	return true, nil
}

func ensure(ctx context.Context, c client.Client, obj client.Object, namespace, name string) error {
	log := logf.FromContext(ctx)
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%s %s: cannot copy the object", kind, obj.GetName())
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	switch {
	case err == nil:
		if fs, ok := current.(*flowcontrolv1.FlowSchema); ok && !routes(fs, namespace, name) {
			log.Info("FlowSchema left as it is, though it does not name the operator's service account",
				"name", fs.Name, "serviceAccount", namespace+"/"+name)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting %s %s: %w", kind, obj.GetName(), err)
	}
	switch err := c.Create(ctx, obj, client.FieldOwner(v1alpha1.FieldManager)); {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
	}
	log.Info("flow control object created", "kind", kind, "name", obj.GetName())
	return nil
}

// routes tells whether a FlowSchema names the service account among its
// subjects.
func routes(fs *flowcontrolv1.FlowSchema, namespace, name string) bool {
	for _, r := range fs.Spec.Rules {
		for _, s := range r.Subjects {
			if sa := s.ServiceAccount; sa != nil && sa.Namespace == namespace && (sa.Name == name || sa.Name == "*") {
				return true
			}
		}
	}
	return false
}
