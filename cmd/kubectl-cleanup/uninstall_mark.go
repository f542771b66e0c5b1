package main

import (
	"context"
	"slices"
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

// deleteMarkPolicy deletes the protection-mark and governed-namespace
// policies and their bindings before uninstall strips the clusters and
// namespaces: they let only the operator change the protection label, the
// accepted confirmation, the pin and the namespace's mark, the marks
// uninstall is about to remove, so they would refuse a person's uninstall. Deletion protection itself stays in force until the end.
func (u *uninstaller) deleteMarkPolicy(ctx context.Context) error {
	deleted, err := u.deleteAdmissionObjects(ctx, isMarkObject)
	if deleted {
		u.markGoneBy = u.now().Add(markLag)
	}
	return err
}

func isMarkObject(obj client.Object) bool {
	return slices.ContainsFunc(markPolicies, func(p string) bool { return obj.GetName() == p || obj.GetName() == admissionpolicy.BindingName(p) })
}

// markPolicies guard the marks uninstall removes: the cluster's and the
// namespace's.
var markPolicies = []string{admissionpolicy.ProtectionMarkPolicy, admissionpolicy.GovernedNamespacePolicy}

// markRefused says whether err is the protection-mark policy refusing a
// change.
func markRefused(err error) bool {
	return apierrors.IsForbidden(err) && slices.ContainsFunc(markPolicies, func(p string) bool {
		return strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+p+"'")
	})
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
