package v1alpha1

// Condition types on a CleanupPolicy, read by kstatus (Argo CD, Flux, kubectl wait).
const (
	// ReadyCondition is always present: True when every expression compiled
	// and the policy was evaluated against the fleet without error.
	ReadyCondition = "Ready"
	// ReconcilingCondition is present, True, only while the operator is
	// working towards the latest generation.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is present, True, only while the policy cannot make
	// progress until someone changes it or the objects it reads.
	StalledCondition = "Stalled"
	// GuardedCondition is present on every policy the operator reconciled:
	// True while it keeps its admission policies, their bindings and its
	// flow-control objects as it renders them, putting back any that is
	// deleted or changed; False when it cannot, so that protection which
	// goes away is said where the policies are read, not only in a metric.
	// It describes the operator, not the policy: kstatus and the Argo CD
	// health check do not read it, and Ready keeps its meaning.
	GuardedCondition = "Guarded"
)

// Reasons of the policy's conditions.
const (
	// SucceededReason surfaces when the policy compiled and was evaluated
	// against every ManagedCluster without error.
	SucceededReason = "Succeeded"
	// InvalidCELExpressionReason surfaces when an expression does not parse,
	// names an unbound variable, returns the wrong type or may cost too much.
	// The message names the field path. The policy governs nothing new and
	// the clusters it governed are held until it is fixed.
	InvalidCELExpressionReason = "InvalidCELExpression"
	// InvalidSpecReason surfaces when the spec is wrong in a way the schema
	// does not catch, such as two stages or rules of the same name, or a
	// deletion-signal manifest without a kind.
	InvalidSpecReason = "InvalidSpec"
	// BudgetExhaustedReason surfaces when one reconcile spent its CEL cost
	// budget before every cluster was evaluated; the next reconcile goes on
	// from where it stopped.
	BudgetExhaustedReason = "BudgetExhausted"
	// ReconcileErrorReason surfaces while the policy's last reconcile
	// failed (a read of the hub, a write of its counts): it is retried with
	// backoff, and the status says so rather than what an earlier
	// reconcile found.
	ReconcileErrorReason = "ReconcileError"
	// EvaluationErrorReason surfaces when an expression failed at run time for
	// some clusters (a missing key, a wrong type, the cost budget used up).
	// Those clusters are held: no decision is taken on a guess.
	EvaluationErrorReason = "EvaluationError"
	// WriteFailedReason is the reason of the Warning Event on a ManifestWork
	// or ConfigurationPolicy whose decision the API server refused to write
	// (an admission policy or webhook, most often). The write is tried again.
	WriteFailedReason = "WriteFailed"
	// TerminatingReason surfaces while the policy is being deleted and still
	// governs clusters whose teardown has not ended; the message names them.
	// The policy keeps its in-use finalizer until they end.
	TerminatingReason = "Terminating"
	// ResourceNotServedReason surfaces when a monitored resource or a stage
	// names a resource the API server does not serve (a typo, or a CRD not
	// installed yet). The message names the field. A cluster being deleted
	// under the policy is held at that step until the resource is served or
	// removed from the policy.
	ResourceNotServedReason = "ResourceNotServed"
	// SuspendedReason surfaces, on Ready True, when spec.suspend is true: the
	// operator makes no write for what the policy governs. The status is
	// written once, when suspend turns true, and not again while it stays
	// true (kstatus: Current, then InProgress after an edit made meanwhile),
	// but for the Guarded condition, which describes the operator.
	SuspendedReason = "Suspended"
	// SignalRefusedReason surfaces, on Ready False, when the policy's
	// deletion-signal manifests break the operator's limits (kinds, sizes):
	// no signal work is applied for it. The message names each manifest.
	SignalRefusedReason = "SignalRefused"
	// TeardownsHeldReason surfaces, on Ready False with Stalled True, while
	// a governed teardown is held on something only a person can clear (a
	// Required timeout passed or a hold on an error, the blast radius); it
	// clears by itself once none is.
	TeardownsHeldReason = "TeardownsHeld"
	// OperatorNamespaceMissingReason surfaces, on Ready False with Stalled
	// True, when the operator's namespace (--operator-namespace, else
	// POD_NAMESPACE, else cleanup-operator-system) does not exist: no
	// teardown record can be written there, so every teardown the policy
	// governs is held until it is created.
	OperatorNamespaceMissingReason = "OperatorNamespaceMissing"
	// GuardsInPlaceReason surfaces, on Guarded True, while the operator
	// watches its admission and flow-control objects and puts back any that
	// is deleted or changed. The message names the last one it put back
	// since it started, what had happened to it and when it was put back.
	GuardsInPlaceReason = "GuardsInPlace"
	// GuardUnrestorableReason surfaces, on Guarded False, when the operator
	// lacks the rights of its bootstrap ClusterRole to watch and write its
	// admission and flow-control objects, and so runs without putting them
	// back: one deleted or changed stays so, and the protection it gives is
	// gone. The message names the missing rights.
	GuardUnrestorableReason = "GuardUnrestorable"
)

// MaxConditionMessage is the longest condition message the API accepts.
const MaxConditionMessage = 32768

// ConditionMessage is message cut to what the API accepts, marked as cut.
func ConditionMessage(message string) string {
	if len(message) > MaxConditionMessage {
		return message[:MaxConditionMessage-3] + "..."
	}
	return message
}
