package snapshot

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// LoadSchemas reads the ManagedCluster, ManifestWork and ConfigurationPolicy
// CRDs from the API server, so that expressions are checked against the
// versions installed. A CRD that is absent leaves its variable dynamic; the
// names of those absent are returned.
func LoadSchemas(ctx context.Context, r client.Reader) (cel.Schemas, []string, error) {
	var crds []apiextensionsv1.CustomResourceDefinition
	var missing []string
	for _, name := range []string{cel.ManagedClusterCRD, cel.ManifestWorkCRD, cel.ConfigurationPolicyCRD} {
		var crd apiextensionsv1.CustomResourceDefinition
		err := r.Get(ctx, client.ObjectKey{Name: name}, &crd)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case err != nil:
			return cel.Schemas{}, nil, err
		default:
			crds = append(crds, crd)
		}
	}
	s, err := cel.SchemasFromCRDs(crds)
	return s, missing, err
}
