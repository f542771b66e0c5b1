package decision

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// IsSignalWork says whether a ManifestWork is one of the operator's
// deletion-signal works: it carries the signal label and the operator's
// managed-by label. The operator changes or deletes only objects that carry
// the managed-by label; a work that merely carries the signal label is any
// work, which the orphaning rules decide for and a teardown deletes.
func IsSignalWork(w metav1.Object) bool {
	l := w.GetLabels()
	return l[v1alpha1.SignalWorkLabel] == "true" && l[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
}
