package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// changeResult is what a policy change cost on a settled fleet: the
// operator should write each work whose decision changed once, and
// nothing else but the policy's status.
type changeResult struct {
	affected int           // works whose decision the change changed
	settled  time.Duration // from the change until the operator stopped writing
	once     int           // affected works written exactly once
	again    int           // affected works written more than once
	missed   int           // affected works not written
	other    int           // works written that the change did not affect
	status   int           // writes of the policy's status
	rest     map[string]int
}

// changedRule is the orphaning rule the change adds: one work in ten of
// each cluster (work-000, work-010, ...) is orphaned from now on.
const changedRule = `{"spec":{"orphaning":[{"name":"keep-tens","when":"work.metadata.name.endsWith('0')"}]}}`

// policyChange adds an orphaning rule to the settled fleet's policy and
// counts, by object, the operator's writes until it settles again.
func policyChange(ctx context.Context, admin client.Client, tail *auditTail, auditLog string, quiet time.Duration, f fleet) (changeResult, error) {
	var res changeResult
	pol := &unstructured.Unstructured{}
	pol.SetAPIVersion("cleanup.fleetops.dev/v1alpha1")
	pol.SetKind("CleanupPolicy")
	pol.SetName("bench")
	offset, err := logSize(auditLog)
	if err != nil {
		return res, err
	}
	began := time.Now()
	if err := admin.Patch(ctx, pol, client.RawPatch(types.MergePatchType, []byte(changedRule))); err != nil {
		return res, fmt.Errorf("changing the policy: %w", err)
	}
	// Settled: every affected work written and no write for quiet. A
	// pause of quiet alone is not the end: a fleet's works are
	// re-evaluated in bursts.
	for {
		if _, err := settle(ctx, tail, began, quiet); err != nil {
			return res, fmt.Errorf("after the policy change (%s): %w", res, err)
		}
		res.settled = time.Since(began) - quiet
		written, err := objectWrites(auditLog, userOperator, offset, began)
		if err != nil {
			return res, err
		}
		res.count(written, f)
		if res.missed == 0 {
			return res, nil
		}
	}
}

// logSize is the audit log's size: an offset to read new lines from.
func logSize(file string) (int64, error) {
	info, err := os.Stat(file)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// count sorts the writes by object against the works the change affects.
func (r *changeResult) count(written map[string]int, f fleet) {
	affected := map[string]bool{}
	for i := range f.clusters {
		for j := 0; j < f.works; j += 10 {
			affected[fmt.Sprintf("manifestworks %s/work-%03d", clusterName(i), j)] = true
		}
	}
	*r = changeResult{affected: len(affected), settled: r.settled, rest: map[string]int{}}
	for key, n := range written {
		switch {
		case affected[key] && n == 1:
			r.once++
		case affected[key]:
			r.again++
		case strings.HasPrefix(key, "manifestworks "):
			r.other++
		case strings.HasPrefix(key, "cleanuppolicies/status "):
			r.status += n
		default:
			r.rest[key] = n
		}
	}
	r.missed = r.affected - r.once - r.again
}

func (r changeResult) String() string {
	s := fmt.Sprintf("%d works affected: %d written once, %d more than once, %d not written; %d other works written; "+
		"%d policy status writes; settled %.1f s after the change", r.affected, r.once, r.again, r.missed, r.other, r.status, r.settled.Seconds())
	if len(r.rest) > 0 {
		s += fmt.Sprintf("; other writes %v", r.rest)
	}
	return s
}
