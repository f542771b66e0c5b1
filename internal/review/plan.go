package review

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// planner takes the operator's teardown decisions over one store, as the
// preview (`kubectl cleanup plan`) does over an API server.
type planner struct {
	reader *snapshot.Reader
	now    time.Time
	// confirmationMaxAge is how long a deletion confirmation counts.
	confirmationMaxAge time.Duration
}

// newPlanner decides with the operator's settings st, counting the
// teardown records the store holds in records ("": none).
func newPlanner(s *store, env *cel.Env, st *settings.Settings, records string, now time.Time) *planner {
	return &planner{now: now, confirmationMaxAge: st.DeleteConfirmationMaxAge.Duration,
		reader: &snapshot.Reader{Client: s, APIReader: s, Mapper: s.mapper, Cache: cel.NewCache(env),
			Governance: decision.NewGovernance(), Now: func() time.Time { return now },
			NamespaceDeny: st.NamespaceDenyList(), BlastRadius: st.BlastRadius, RecordsNamespace: records}}
}

// envOf compiles against the CRD schemas the snapshot holds; without them
// the variables are untyped, as in the preview of a user who may not read
// CRDs.
func envOf(ctx context.Context, r client.Reader) (*cel.Env, error) {
	schemas, _, err := snapshot.LoadSchemas(ctx, r)
	switch {
	case errors.Is(err, errNotHeld):
		schemas = cel.Schemas{}
	case err != nil:
		return nil, err
	}
	return cel.NewEnv(schemas)
}

// plan is the plan of one cluster, with its protection and the prune
// decisions of its ConfigurationPolicies, as `kubectl cleanup plan` takes it.
func (p *planner) plan(ctx context.Context, name string) (*decision.Plan, error) {
	g, err := p.reader.Govern(ctx, name, false)
	if err != nil {
		return nil, err
	}
	if g.Cluster == nil {
		return nil, apierrors.NewNotFound(snapshot.ManagedClusterGVK.GroupVersion().WithResource("managedclusters").GroupResource(), name)
	}
	s, err := p.reader.Read(ctx, g, decision.Memory{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	plan := decision.PlanTeardown(g, s)
	if g.Cluster.GetDeletionTimestamp() == nil {
		protection := decision.DecideProtection(g, p.now, p.confirmationMaxAge)
		plan.Protection = &protection
	}
	if plan.Held == "" && s.Namespace != nil {
		if plan.Prune, err = p.reader.Prune(ctx, g, name); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	return plan, nil
}
