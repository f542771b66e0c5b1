package monitoring

import (
	"strings"
	"testing"
)

// TestCheckQuery shows that checkQuery refuses what the operator does not
// export, so that the dashboard and alert checks can fail.
func TestCheckQuery(t *testing.T) {
	e := exportedMetrics(t)
	for _, tc := range []struct {
		expr, problem string
	}{
		{`sum by (step) (cleanup_clusters_in_cleanup)`, ""},
		{`histogram_quantile(0.9, sum by (le, outcome) (rate(cleanup_cluster_duration_seconds_bucket[5m])))`, ""},
		{`sum by (controller) (rate(controller_runtime_reconcile_total{result="error"}[5m]))`, ""},
		{`max by (controller) (workqueue_depth{name="managedcluster"})`, ""},
		{`max(leader_election_master_status{name="x"}) < 1 or absent(leader_election_master_status{name="x"})`, ""},
		{`(time() - cleanup_cluster_deletion_timestamp_seconds) > on (cluster, policy) cleanup_cluster_timeout_seconds`, ""},
		{`sum(rate(cleanup_clusters_in_cleanup[5m]`, "does not parse"},
		{`cleanup_clusters_deleted`, "metric cleanup_clusters_deleted is not exported"},
		{`cleanup_cluster_duration_seconds`, "is not exported"}, // a histogram is served as _bucket, _sum, _count
		{`cleanup_clusters_in_cleanup{stage="x"}`, `has no label "stage"`},
		{`cleanup_cluster_duration_seconds_count{le="1"}`, `has no label "le"`},
		{`sum by (cluster) (cleanup_clusters_in_cleanup)`, `groups by label "cluster"`},
		{`cleanup_cluster_step * on (policy) cleanup_cluster_timeout_seconds`, ""},
		{`cleanup_clusters_in_cleanup * on (cluster) group_left (policy) cleanup_cluster_step`, `matches on label "policy"`},
		{`sum by (job) (controller_runtime_reconcile_total)`, `groups by label "job"`},
		{`{step="x"}`, "names no metric"},
	} {
		problems := strings.Join(checkQuery(tc.expr, e), "; ")
		switch {
		case tc.problem == "" && problems != "":
			t.Errorf("%s: unexpected problems: %s", tc.expr, problems)
		case tc.problem != "" && !strings.Contains(problems, tc.problem):
			t.Errorf("%s: want a problem with %q, got %q", tc.expr, tc.problem, problems)
		}
	}
}
