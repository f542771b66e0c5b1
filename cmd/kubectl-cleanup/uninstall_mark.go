package main

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// markLag bounds how long uninstall waits, once it deleted the
// protection-mark policy, for the API server to stop enforcing it.
const markLag = 30 * time.Second

// markPoll is how often a change the lingering policy refused is tried again.
const markPoll = 250 * time.Millisecond

// deleteMarkPolicy deletes the protection-mark policy and its binding
// before uninstall strips the clusters: the policy lets only the operator
// change the protection label, the accepted confirmation and the pin, the
// marks uninstall is about to remove, so it would refuse a person's
// uninstall. Deletion protection itself stays in force until the end.
func (u *uninstaller) deleteMarkPolicy(ctx context.Context) error {
	deleted, err := u.deleteAdmissionObjects(ctx, isMarkObject)
	if deleted {
		u.markGoneBy = u.now().Add(markLag)
	}
	return err
}

func isMarkObject(obj client.Object) bool {
	return obj.GetName() == admissionpolicy.ProtectionMarkPolicy || obj.GetName() == admissionpolicy.BindingName(admissionpolicy.ProtectionMarkPolicy)
}

// markRefused says whether err is the protection-mark policy refusing a
// change.
func markRefused(err error) bool {
	return apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+admissionpolicy.ProtectionMarkPolicy+"'")
}

// whileMarkLingers runs change, and again while the protection-mark policy
// uninstall has just deleted refuses it: the API server stops enforcing a
// deleted policy once its own watch delivers the deletion.
func (u *uninstaller) whileMarkLingers(ctx context.Context, change func() error) error {
	for {
		err := change()
		if !markRefused(err) || u.markGoneBy.IsZero() || !u.now().Before(u.markGoneBy) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(markPoll):
		}
	}
}
