package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
)

// Signal-work modes of --signal-works.
const (
	signalWorksOrphan = "orphan"
	signalWorksKeep   = "keep"
)

var (
	managedClusterGVK      = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"}
	manifestWorkGVK        = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}
	configurationPolicyGVK = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"}
	cleanupPolicyGVK       = v1alpha1.GroupVersion.WithKind("CleanupPolicy")
	namespaceGVK           = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// uninstallScheme holds the types uninstall reads typed; everything else
// it reads as metadata or unstructured, so that it needs no CRD types.
func uninstallScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(workv1.Install(s))
	return s
}

// uninstaller removes from a hub what the operator wrote there.
type uninstaller struct {
	c   client.Client
	out io.Writer
	// dryRun prints what would change and changes nothing.
	dryRun bool
	// wait waits for teardowns in progress and for the operator to stop
	// instead of refusing.
	wait bool
	// timeout bounds every wait together.
	timeout time.Duration
	// interval is how often a wait looks again.
	interval time.Duration
	// ignoreOperator goes on while the operator seems to run.
	ignoreOperator bool
	// signalWorks is signalWorksOrphan or signalWorksKeep.
	signalWorks string
	now         func() time.Time
	// markGoneBy, once uninstall deleted the protection-mark policy, is
	// when the API server must have stopped enforcing it.
	markGoneBy time.Time
	// wouldRefuse, in a dry run, says what a run would refuse for now.
	wouldRefuse []string
	// keptWorkOwner says that the work-owner policy stays, signal works
	// being left to retire.
	keptWorkOwner bool
}

func (u *uninstaller) printf(format string, args ...any) {
	fmt.Fprintf(u.out, format, args...)
}

// run checks that nothing is in the way, then removes the operator's
// finalizers, labels, annotations, admission policies and signal works.
func (u *uninstaller) run(ctx context.Context) error {
	if err := u.defaults(); err != nil {
		return err
	}
	deadline := u.now().Add(u.timeout)
	if u.dryRun {
		u.printf("Dry run: nothing is changed.\n")
	}
	if err := u.checkTeardowns(ctx, deadline); err != nil {
		return err
	}
	stopped, err := u.checkOperator(ctx, deadline)
	if err != nil {
		return err
	}
	if stopped {
		// A teardown started before the operator went: it will not end now.
		if err := u.checkTeardowns(ctx, time.Time{}); err != nil {
			return err
		}
	}

	var errs []error
	for _, step := range []func(context.Context) error{
		u.deleteMarkPolicy, u.releaseClusters, u.releasePolicies, u.unlabelNamespaces, u.unannotateWorks,
		u.unannotateConfigurationPolicies, u.deleteAdmission,
	} {
		if err := step(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := u.retireSignalWorks(ctx, deadline); err != nil {
		errs = append(errs, err)
	} else if err := u.deleteWorkOwnerPolicy(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := u.reportKept(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	switch {
	case u.dryRun && len(u.wouldRefuse) > 0:
		return &refusal{msg: fmt.Sprintf("dry run done: a run now would refuse (%s) and change none of these", strings.Join(u.wouldRefuse, "; "))}
	case u.dryRun:
		u.printf("Dry run done: run again without --dry-run to make these changes.\n")
	case u.keptWorkOwner && u.signalWorks == signalWorksKeep:
		u.printf("Done, but for the signal works left in place and the admission policy %s that guards them: once they "+
			"are deleted, or retired by a run without --signal-works=keep, run this again.\n", admissionpolicy.WorkOwnerPolicy)
	case u.keptWorkOwner:
		u.printf("Done, but for the signal works left in place and the admission policy %s that guards them: run this again "+
			"once the work agent can confirm their Orphan.\n", admissionpolicy.WorkOwnerPolicy)
	default:
		u.printf("Done: the hub no longer holds the operator's finalizers, labels, annotations or admission policies.\n")
	}
	return nil
}

// defaults checks the flags and fills in what a test may leave unset.
func (u *uninstaller) defaults() error {
	switch u.signalWorks {
	case signalWorksOrphan, signalWorksKeep:
	default:
		return usagef("--signal-works: %q is not one of %s, %s", u.signalWorks, signalWorksOrphan, signalWorksKeep)
	}
	if u.timeout <= 0 {
		return usagef("--timeout: %s is not a positive duration", u.timeout)
	}
	if u.now == nil {
		u.now = time.Now
	}
	if u.interval <= 0 {
		u.interval = 2 * time.Second
	}
	return nil
}

// reportKept says what stays on purpose.
func (u *uninstaller) reportKept(ctx context.Context) error {
	cms := &metav1.PartialObjectMetadataList{}
	cms.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
	if err := u.c.List(ctx, cms, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy},
		client.MatchingFields{"metadata.name": v1alpha1.DecisionsConfigMap}); err != nil {
		return fmt.Errorf("listing the %s ConfigMaps: %w", v1alpha1.DecisionsConfigMap, err)
	}
	u.printf("Left in place on purpose:\n")
	u.printf("  the deleteOption of ManifestWorks and the pruneObjectBehavior of ConfigurationPolicies: real settings, " +
		"now yours to keep or change;\n")
	for _, cm := range cms.Items {
		u.printf("  ConfigMap %s/%s: hub templates may read it; deleting it while they do makes the policy framework delete "+
			"their ConfigurationPolicies on the managed clusters. Delete it once no template references it;\n", cm.Namespace, cm.Name)
	}
	u.printf("  the CleanupPolicies and their CRD: delete the CRD (kubectl delete crd cleanuppolicies.cleanup.fleetops.dev) to remove them.\n")
	return nil
}

// uninstallLong is the help of uninstall.
const uninstallLong = `uninstall removes from the hub every finalizer, label, annotation and admission
policy the cleanup operator put there, so that the hub deletes ManagedClusters
as it would without the operator:

  - the finalizer cleanup.fleetops.dev/cluster-cleanup and the annotations
    cleanup.fleetops.dev/policy, cleanup.fleetops.dev/forced-objects,
    cleanup.fleetops.dev/forcing and cleanup.fleetops.dev/unconfirmed-orphans
    from ManagedClusters;
  - the finalizer cleanup.fleetops.dev/in-use from CleanupPolicies;
  - the label cleanup.fleetops.dev/cluster-deleting from namespaces;
  - the annotations cleanup.fleetops.dev/orphaning from ManifestWorks and
    cleanup.fleetops.dev/prune from ConfigurationPolicies;
  - the ValidatingAdmissionPolicies ` + admissionpolicy.DeletingClusterPolicy + `,
    ` + admissionpolicy.DeletingWorkPolicy + `,
    ` + admissionpolicy.DeletionProtectionPolicy + `,
    ` + admissionpolicy.DeleteConfirmationPolicy + `,
    ` + admissionpolicy.ProtectionMarkPolicy + `,
    ` + admissionpolicy.ProtectedNamespacePolicy + `,
    ` + admissionpolicy.TeardownConditionPolicy + `,
    ` + admissionpolicy.AuthorityPolicy + `,
    ` + admissionpolicy.SignalManifestsPolicy + `,
    ` + admissionpolicy.ReleasePolicy + `,
    ` + admissionpolicy.OCMCleanupHoldPolicy + `,
    ` + admissionpolicy.GovernedNamespacePolicy + ` and
    ` + admissionpolicy.WorkOwnerPolicy + `, and their bindings;
  - the deletion-signal ManifestWorks, without signalling a deletion: each
    gets deleteOption Orphan and is deleted once the work agent applied it
    (--signal-works=keep leaves them as they are).

It deletes ` + admissionpolicy.ProtectionMarkPolicy + ` and
` + admissionpolicy.GovernedNamespacePolicy + ` and their bindings first:
they let only the operator change the marks uninstall removes from
ManagedClusters (the protection label, the accepted confirmation and the
annotation cleanup.fleetops.dev/policy) and from their namespaces. The other
policies go after, and ` + admissionpolicy.WorkOwnerPolicy + ` last, once
the signal works are retired.

It leaves the deleteOption of ManifestWorks and the pruneObjectBehavior of
ConfigurationPolicies (real settings), the cleanup-decisions ConfigMaps (hub
templates may read them), the teardown records and the settings ConfigMap in
the operator's namespace (kubectl cleanup history and diff read them) and the
CleanupPolicies.

Uninstall the operator first: helm uninstall RELEASE -n NAMESPACE for the
Helm chart, make undeploy for config/default (it also deletes the CRD, and
with it every CleanupPolicy, and the operator's namespace, with its teardown
records), or delete its OLM Subscription and CSV; stop run-local or a
manager started by hand. A running operator would put its finalizers back, and
uninstall refuses while its Deployment has replicas, its leader-election
Lease is renewed, or any operator process, however started, renewed its
heartbeat (a ConfigMap labelled ` + heartbeat.Label + `=true
in its namespace) within three of its intervals. It also refuses while a
teardown is in progress (a deleted ManagedCluster with the operator's
finalizer): removing the finalizer would leave that cleanup half done.
--wait waits for both instead: run it before you uninstall the operator, and
uninstall the operator once it says the teardowns have ended. --dry-run
exits 1 when a run now would refuse.`

func newUninstallCommand(o *options) *cobra.Command {
	u := &uninstaller{timeout: 30 * time.Minute, signalWorks: signalWorksOrphan}
	cmd := noNamespace(&cobra.Command{
		Use:   "uninstall",
		Short: "Remove what the operator put on the hub, once the operator is gone",
		Long:  uninstallLong,
		Example: `  kubectl cleanup uninstall --dry-run
  kubectl cleanup uninstall --wait --timeout 1h
  kubectl cleanup uninstall`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" {
				return usagef("--output: uninstall prints text only")
			}
			c, err := o.connect(uninstallScheme())
			if err != nil {
				return err
			}
			u.c, u.out = c, o.streams.Out
			return u.run(cmd.Context())
		},
	}, "it looks for the operator, its teardowns and its marks in every namespace, so that an operator "+
		"running in another namespace than the one expected still stops it")
	cmd.Flags().BoolVar(&u.dryRun, "dry-run", false, "Print what would change, and what is in the way, and change nothing.")
	cmd.Flags().BoolVar(&u.wait, "wait", false, "Wait for the teardowns in progress to end and for the operator to stop, instead of refusing.")
	cmd.Flags().DurationVar(&u.timeout, "timeout", u.timeout, "How long to wait, for teardowns, the operator and the work agent together.")
	cmd.Flags().BoolVar(&u.ignoreOperator, "ignore-running-operator", false,
		"Go on although the operator seems to run (for a stale Lease, heartbeat or Deployment you know is not the operator's).")
	cmd.Flags().StringVar(&u.signalWorks, "signal-works", u.signalWorks,
		"What to do with the deletion-signal ManifestWorks: orphan (set deleteOption Orphan, delete once the work agent applied it) or keep.")
	return cmd
}
