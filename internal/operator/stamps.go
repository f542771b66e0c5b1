package operator

import (
	"bytes"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// stampAnnotations are the annotations in which the operator records the
// decision it stamped on an object it does not own (a work's deleteOption,
// a ConfigurationPolicy's pruneObjectBehavior).
var stampAnnotations = []string{v1alpha1.OrphaningAnnotation, v1alpha1.PruneAnnotation}

// dropForeignStamps removes from a cached object each stamp annotation the
// operator's field manager does not own: whoever may patch the object can
// write one, and the operator reads them as its own (whether it stamped an
// object, and the counts of its policies' status). It reads the
// managedFields, so it runs before they are stripped.
func dropForeignStamps(obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	annotations := o.GetAnnotations()
	var foreign []string
	for _, key := range stampAnnotations {
		if _, has := annotations[key]; has && !ownsAnnotation(o.GetManagedFields(), key) {
			foreign = append(foreign, key)
		}
	}
	if len(foreign) == 0 {
		return
	}
	kept := make(map[string]string, len(annotations))
	for k, v := range annotations {
		kept[k] = v
	}
	for _, key := range foreign {
		delete(kept, key)
	}
	o.SetAnnotations(kept)
}

// ownsAnnotation says whether the operator's field manager owns the
// annotation: its managed fields name the key, which appears in them only
// under metadata.annotations.
func ownsAnnotation(entries []metav1.ManagedFieldsEntry, key string) bool {
	field := []byte(strconv.Quote("f:" + key))
	for _, e := range entries {
		if e.Manager == v1alpha1.FieldManager && e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, field) {
			return true
		}
	}
	return false
}
