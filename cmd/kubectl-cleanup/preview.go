package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// preview takes the operator's teardown decision for a cluster from a live
// API server, with the operator's reader: the governing policy, the
// snapshot, and the plan the operator executes. It only reads.
type preview struct {
	client client.Reader
	reader *snapshot.Reader
	// confirmationMaxAge is how long the operator counts a deletion confirmation.
	confirmationMaxAge time.Duration
}

// newPreview compiles policies against the CRD schemas the API server
// serves, as the operator does. A user who may not read CRDs gets untyped
// variables: the decisions are the same, only the type checks of the
// expressions are skipped.
//
// It decides with the operator's settings st, counting the teardown
// records in records ("": none).
func newPreview(ctx context.Context, c client.Reader, mapper meta.RESTMapper, st *settings.Settings, records string) (*preview, error) {
	schemas, _, err := snapshot.LoadSchemas(ctx, c)
	switch {
	case apierrors.IsForbidden(err):
		schemas = cel.Schemas{}
	case err != nil:
		return nil, fmt.Errorf("reading the CRD schemas: %w", err)
	}
	env, err := cel.NewEnv(schemas)
	if err != nil {
		return nil, err
	}
	return &preview{client: c, confirmationMaxAge: st.DeleteConfirmationMaxAge.Duration,
		reader: &snapshot.Reader{Client: c, Cache: cel.NewCache(env), Governance: decision.NewGovernance(), Mapper: mapper, APIReader: c, Leases: true,
			NamespaceDeny: st.NamespaceDenyList(), BlastRadius: st.BlastRadius, RecordsNamespace: records}}, nil
}

// plan is the plan of one cluster, with the prune decisions of its
// ConfigurationPolicies.
func (p *preview) plan(ctx context.Context, name string) (*decision.Plan, error) {
	g, err := p.reader.Govern(ctx, name, false)
	if err != nil {
		return nil, err
	}
	if g.Cluster == nil {
		return nil, notFoundf("ManagedCluster %s not found", name)
	}
	s, err := p.reader.Read(ctx, g, decision.Memory{})
	if err != nil {
		return nil, err
	}
	plan := decision.PlanTeardown(g, s)
	if g.Cluster.GetDeletionTimestamp() == nil {
		protection := decision.DecideProtection(g, time.Now(), p.confirmationMaxAge)
		plan.Protection = &protection
		liveStates(plan)
	}
	if plan.Held == "" && s.Namespace != nil {
		if plan.Prune, err = p.reader.Prune(ctx, g, name); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// liveStates gives the steps of a cluster not being deleted their states
// for a deletion now. No teardown is behind it, so no step is done, not
// even one that would find nothing to do: the first step is next and the
// others later, in every output format.
func liveStates(plan *decision.Plan) {
	for i := range plan.Steps {
		plan.Steps[i].State = decision.StateLater
		if i == 0 {
			plan.Steps[i].State = decision.StateNext
		}
	}
}

// clusterStatus is where the cleanup of a deleted cluster stands.
type clusterStatus struct {
	Cluster string `json:"cluster"`
	Policy  string `json:"policy,omitempty"`
	// Step is the reason of the ContentDeleteSuccess condition.
	Step    string `json:"step"`
	Message string `json:"message,omitempty"`
	// Since is when the cluster was deleted.
	Since metav1.Time `json:"since"`
	// Next is the plan's next step, and Remaining what it still has to
	// remove or wait for.
	Next      decision.StepKind `json:"next,omitempty"`
	Remaining remaining         `json:"remaining"`
	// Suspended says, live, why the operator writes nothing for the
	// cluster (a suspended policy, or its paused annotation).
	Suspended string `json:"suspended,omitempty"`
	// Hooks are the pre-cleanup hooks that hold the cleanup.
	Hooks []string `json:"hooks,omitempty"`
}

// remaining counts the objects a cleanup still waits for, by step.
type remaining struct {
	Monitored int            `json:"monitored"`
	Stages    map[string]int `json:"stages,omitempty"`
	Namespace bool           `json:"namespace"`
}

// status lists the clusters being deleted that carry the operator's
// finalizer, with their step and what remains.
func (p *preview) status(ctx context.Context) ([]clusterStatus, error) {
	clusters := &unstructured.UnstructuredList{}
	clusters.SetAPIVersion("cluster.open-cluster-management.io/v1")
	clusters.SetKind("ManagedClusterList")
	if err := p.client.List(ctx, clusters); err != nil {
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	out := []clusterStatus{}
	for _, mc := range clusters.Items {
		if mc.GetDeletionTimestamp() == nil || !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
			continue
		}
		s := clusterStatus{Cluster: mc.GetName(), Policy: mc.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation],
			Since: *mc.GetDeletionTimestamp(), Step: "Pending"}
		if c := decision.ClusterCondition(&mc, v1alpha1.ContentDeleteSuccessCondition); c != nil {
			s.Step, s.Message = c.Reason, c.Message
		}
		plan, err := p.plan(ctx, mc.GetName())
		var gone *notFoundError
		switch {
		case errors.As(err, &gone):
			continue // its cleanup ended since the list
		case err != nil:
			return nil, err
		}
		if next := plan.Next(); next != nil {
			s.Next = next.Kind
		}
		s.Remaining = remainingOf(plan)
		s.Suspended, s.Hooks = plan.Suspended, plan.Hooks
		// Computed now: the operator writes no condition while suspended.
		switch {
		case plan.Suspended != "":
			s.Step, s.Message = "Suspended", plan.Suspended
		case len(plan.Hooks) > 0 && s.Step == "Pending":
			s.Step = v1alpha1.WaitingForHooksReason
		}
		out = append(out, s)
	}
	return out, nil
}

// remainingOf counts what a plan's steps not done yet wait for or remove.
func remainingOf(plan *decision.Plan) remaining {
	var r remaining
	for _, st := range plan.Steps {
		switch {
		case st.State == decision.StateDone:
		case st.Kind == decision.StepGate:
			r.Monitored = countVerb(st.Actions, decision.VerbWait)
		case st.Kind == decision.StepStage && len(st.Actions) > 0 && countVerb(st.Actions, decision.VerbHold) == 0:
			if r.Stages == nil {
				r.Stages = map[string]int{}
			}
			r.Stages[st.Name] = len(st.Objects())
		case st.Kind == decision.StepNamespace:
			r.Namespace = countVerb(st.Actions, decision.VerbDelete) > 0
		}
	}
	return r
}

func countVerb(actions []decision.Action, verb decision.Verb) int {
	n := 0
	for _, a := range actions {
		if a.Verb == verb {
			n++
		}
	}
	return n
}
