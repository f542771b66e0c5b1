package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// printedCounts are the counts of a policy's status that `kubectl get`
// prints (MATCHED; GOVERNED with -o wide), with their values.
func printedCounts(s *v1alpha1.CleanupPolicyStatus) map[string]int32 {
	return map[string]int32{"matchedClusters": s.MatchedClusters, "governedClusters": s.GovernedClusters}
}

// absentCounts names the printed counts the stored policy u lacks. A merge
// patch of the status leaves out a count that was 0 and stays 0, so a
// policy that never matched a cluster would have none, and print blank
// columns: patchStatus writes the absent ones, 0 included, once.
func absentCounts(u *unstructured.Unstructured) []string {
	var absent []string
	for field := range printedCounts(&v1alpha1.CleanupPolicyStatus{}) {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field); !found {
			absent = append(absent, field)
		}
	}
	return absent
}

// patchStatus writes the status when it changed or lacks a printed count
// (absent); a change of counts alone within maxFleetPace of the last
// write waits, and it says how long.
func (r *CleanupPolicyReconciler) patchStatus(ctx context.Context, orig, p *v1alpha1.CleanupPolicy, absent []string) (time.Duration, error) {
	if len(absent) == 0 && storedAlike(&orig.Status, &p.Status) {
		return 0, nil
	}
	now := time.Now()
	if countsOnly(&orig.Status, &p.Status) {
		if held := r.pace.countsWait(p.Name, now); held > 0 {
			return held, nil
		}
	}
	patch, err := statusPatch(orig, p, absent)
	if err != nil {
		return 0, err
	}
	if err := r.Status().Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("patching the status of CleanupPolicy %s: %w", p.Name, err)
	}
	r.pace.statusWritten(p.Name, now)
	return 0, nil
}

// statusPatch is the merge patch from orig's status to p's, with the
// printed counts named in absent set to p's values, whether they changed
// or not.
func statusPatch(orig, p *v1alpha1.CleanupPolicy, absent []string) (client.Patch, error) {
	merge := client.MergeFrom(orig)
	if len(absent) == 0 {
		return merge, nil
	}
	raw, err := merge.Data(p)
	if err != nil {
		return nil, err
	}
	patch := map[string]any{}
	if err := json.Unmarshal(raw, &patch); err != nil {
		return nil, err
	}
	status, _ := patch["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		patch["status"] = status
	}
	counts := printedCounts(&p.Status)
	for _, field := range absent {
		status[field] = counts[field]
	}
	raw, err = json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, raw), nil
}
