package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// setReadyCondition marks the policy ready, or not, and drops Reconciling
// and Stalled, which kstatus wants present only while true.
func setReadyCondition(p *v1alpha1.CleanupPolicy, status metav1.ConditionStatus, reason, message string) {
	setCondition(p, v1alpha1.ReadyCondition, status, reason, message)
	meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ReconcilingCondition)
	meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.StalledCondition)
}

// setStalledCondition marks the policy not ready and stalled: it cannot go
// on until someone changes it or the objects it reads.
func setStalledCondition(p *v1alpha1.CleanupPolicy, reason, message string) {
	setReadyCondition(p, metav1.ConditionFalse, reason, message)
	setCondition(p, v1alpha1.StalledCondition, metav1.ConditionTrue, reason, message)
}

// setReconcilingCondition marks the policy not ready yet and still in progress.
func setReconcilingCondition(p *v1alpha1.CleanupPolicy, reason, message string) {
	setReadyCondition(p, metav1.ConditionFalse, reason, message)
	setCondition(p, v1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, message)
}

// setReconcileFailed reports a reconcile that failed and is retried: not
// Ready, Reconciling (kstatus InProgress, Argo CD Progressing).
func setReconcileFailed(p *v1alpha1.CleanupPolicy, err error) {
	setReconcilingCondition(p, v1alpha1.ReconcileErrorReason, "the last reconcile failed and is retried: "+err.Error())
}

// setInvalidCondition reports the errors of a policy that does not compile.
func setInvalidCondition(p *v1alpha1.CleanupPolicy, errs field.ErrorList) {
	reason := v1alpha1.InvalidSpecReason
	for _, e := range errs {
		if isExpressionField(e.Field) {
			reason = v1alpha1.InvalidCELExpressionReason
			break
		}
	}
	setStalledCondition(p, reason, errs.ToAggregate().Error())
}

func isExpressionField(path string) bool {
	for _, suffix := range []string{".when", ".expression", "spec.clusterSelector", "spec.keepNamespace"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

func setCondition(p *v1alpha1.CleanupPolicy, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            v1alpha1.ConditionMessage(message),
		ObservedGeneration: p.Generation,
	})
}
