package decision

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ConfirmationClockSkew is how far in the future a confirmation's time may
// be and still count: the clocks of the client that confirmed and of the
// operator differ a little.
const ConfirmationClockSkew = time.Minute

// DefaultConfirmationMaxAge is how long a deletion confirmation counts
// unless the manager is told otherwise (--delete-confirmation-max-age).
const DefaultConfirmationMaxAge = time.Hour

// Protection is the deletion protection of one cluster that is not being
// deleted: whether it carries the mark, and which deletion confirmation, if
// any, the operator accepts for it.
type Protection struct {
	// Protected says the cluster carries the mark DeletionProtectedLabel.
	Protected bool `json:"protected"`
	// Error is the run-time error of spec.deletionProtection, which
	// protects the cluster until the expression succeeds.
	Error string `json:"error,omitempty"`
	// Held says the cluster is held (no governance decision): its mark and
	// its confirmation stay as they are, except that an accepted
	// confirmation still expires.
	Held bool `json:"held,omitempty"`
	// Accepted is the time (the DeleteConfirmedAtAnnotation value) of the
	// confirmation that counts; empty when none does.
	Accepted string `json:"accepted,omitempty"`
	// Expires is when Accepted stops counting.
	Expires *time.Time `json:"expires,omitempty"`
	// Refused says why a confirmation the cluster carries does not count.
	Refused string `json:"refused,omitempty"`
	// Stamp is the time (RFC 3339) to write as DeleteConfirmedAtAnnotation
	// on a protected cluster confirmed by its name alone (a person's own
	// kubectl annotate): the operator stamps when it saw the confirmation,
	// and accepts it once stamped.
	Stamp string `json:"stamp,omitempty"`
}

// DecideProtection decides the deletion protection of g's cluster at now,
// a confirmation counting for maxAge. It only reads: the operator writes
// what it decides, and the preview prints it.
//
// The mark follows the governing policy's spec.deletionProtection: no
// policy, or no expression, no mark; true, or an error, the mark (when in
// doubt, protect). A held cluster keeps its mark as it is, and so does a
// cluster governed by a policy in dry run, which may add it but removes
// none. A confirmation
// is accepted only on a marked cluster, only when its value is the
// cluster's own name and its time is valid, not in the future and younger
// than maxAge.
func DecideProtection(g *Governed, now time.Time, maxAge time.Duration) Protection {
	mc := g.Cluster
	var p Protection
	switch {
	case g.Held != nil:
		p.Held = true
		p.Protected = IsProtected(mc)
	case g.Policy == nil || g.Policy.DeletionProtection == nil:
	default:
		ok, err := g.Policy.DeletionProtection.Bool(g.Activation)
		if err != nil {
			p.Protected, p.Error = true, err.Error()
		} else {
			p.Protected = ok
		}
	}
	if g.Policy != nil && g.Policy.Spec.DryRun && IsProtected(mc) {
		// A policy in dry run may add the mark, and removes none.
		p.Protected = true
	}
	confirmed, hasConfirmation := mc.GetAnnotations()[v1alpha1.DeleteConfirmedAnnotation]
	if !hasConfirmation {
		return p
	}
	at, hasAt := mc.GetAnnotations()[v1alpha1.DeleteConfirmedAtAnnotation]
	if !hasAt && confirmed == mc.GetName() {
		if p.Protected && !p.Held {
			p.Stamp = now.UTC().Format(time.RFC3339)
		}
		return p
	}
	if p.Refused = refuseConfirmation(mc, confirmed, at, now, maxAge); p.Refused != "" || !p.Protected {
		return p
	}
	if p.Held && mc.GetAnnotations()[v1alpha1.DeleteConfirmationAcceptedAnnotation] != at {
		// A held cluster accepts nothing new.
		return p
	}
	t, _ := time.Parse(time.RFC3339, at)
	expires := t.Add(maxAge)
	p.Accepted, p.Expires = at, &expires
	return p
}

// refuseConfirmation says why a confirmation does not count at now, or ""
// when it does.
func refuseConfirmation(mc *unstructured.Unstructured, confirmed, at string, now time.Time, maxAge time.Duration) string {
	if confirmed != mc.GetName() {
		return fmt.Sprintf("%s is %q, not the cluster's own name %q", v1alpha1.DeleteConfirmedAnnotation, confirmed, mc.GetName())
	}
	if at == "" {
		return fmt.Sprintf("%s is missing: it says when the deletion was confirmed", v1alpha1.DeleteConfirmedAtAnnotation)
	}
	t, err := time.Parse(time.RFC3339, at)
	switch {
	case err != nil:
		return fmt.Sprintf("%s is %q, not a time in RFC 3339", v1alpha1.DeleteConfirmedAtAnnotation, at)
	case t.After(now.Add(ConfirmationClockSkew)):
		return fmt.Sprintf("%s is %s, in the future", v1alpha1.DeleteConfirmedAtAnnotation, at)
	case !now.Before(t.Add(maxAge)):
		return fmt.Sprintf("the confirmation of %s expired: a confirmation counts for %s", at, maxAge)
	}
	return ""
}

// IsProtected says whether the cluster carries the deletion-protection mark.
func IsProtected(mc *unstructured.Unstructured) bool {
	return mc.GetLabels()[v1alpha1.DeletionProtectedLabel] == "true"
}
