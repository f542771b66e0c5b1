// Package plan proves that `kubectl cleanup plan` tells what the operator
// does. TestPlanMatchesTeardown generates fleets from a seed (policies with
// random strategies and strategy rules, monitored resources, default or
// custom stages, keepNamespace, a deletion signal or none, orphaning rules;
// clusters with add-ons, works with and without cleanup-priority, monitored,
// staged and unrelated ConfigMaps, kept namespaces, a cluster no policy
// selects, and at least one BestEffort cluster that is unavailable), runs
// the operator on a real kube-apiserver and etcd with the OCM CRDs and a
// simulated work agent, prints each cluster's plan with the plugin
// (`kubectl cleanup plan CLUSTER -o json`) once the fleet is steady, deletes
// the clusters, and compares each plan with the writes the operator made
// tearing the cluster down, as the API server's audit log records them: the
// same steps in the same order, in each step the same objects with the same
// verbs, the cleanup-priority groups in order (one group's objects in any
// order). A group the plan deletes as a collection must be one
// deletecollection whose response lists exactly its objects. Waits, keeps
// and holds write nothing; status patches and Events are not writes. The test removes the monitored objects, as their
// controllers would, once the teardown reports that it waits for them. No
// namespace controller runs: the operator does not wait for a deleted
// namespace to terminate.
//
// TestDiffMatchesTeardown proves `kubectl cleanup diff` the same way: once
// a seed's fleet is steady, it draws a new spec for one policy (monitored
// resources, stages, keepNamespace and, where no cluster of the policy is
// unavailable, the remove strategy: what the operator acts on only when a
// cluster goes), takes diff's "after" plans from a snapshot of the hub,
// applies the change, tears the fleet down and compares each cluster's
// writes with diff's "after" plan.
//
// The seeds are printed, and again with a replay command on failure:
//
//	PLAN_SEED=<seed>[,<seed>...] go test ./test/plan/ -count=1 -v -run TestPlanMatchesTeardown
//
// A seed fixes the fleet and the test's choices, not the scheduling of the
// operator and the agent: a replay builds the same fleet and plans, and a
// disagreement that depends on timing (a write repeated while the
// operator's cache lags) may not come back every time.
//
// Without PLAN_SEED it runs PLAN_SEEDS random seeds (default 2; `make
// test-plan` runs 20). PLAN_CLUSTERS sets the clusters per seed (default 3),
// PLAN_TIMEOUT how long one seed may take (default 3m), PLAN_PLUGIN a
// prebuilt plugin to use instead of building cmd/kubectl-cleanup, and
// PLAN_KEEP=<dir> keeps the audit log and the operator's log there. The
// flags -plan.seed and -plan.seeds do what PLAN_SEED and PLAN_SEEDS do.
package plan
