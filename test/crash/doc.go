// Package crash proves that a cluster teardown survives the manager running
// it. The manager runs as a real process (cmd/main.go, built by the test) on
// a real kube-apiserver and etcd, with a simulated work agent and add-on
// manager. TestCrashSafety deletes a Required, a BestEffort (its cluster
// unavailable) and a Needless cluster at once, kills the manager with
// SIGKILL at random points of their teardowns and restarts it until they
// end, round after round, until each strategy's teardowns were interrupted
// at 20 points or more. TestLeaderFailover runs two managers with leader
// election and kills the leader after one of its deletes.
//
// The witnesses are the API server's audit log of the operator's writes and
// a watch of the removed objects (etcd revisions order both). Each property
// is a subtest: every teardown ends with the outcome its strategy declares
// (complete); each deletion begins once what precedes it is gone: signal
// work, gate, add-ons, works by cleanup-priority, namespace (in-order); no
// object is deleted twice (once); nothing but the cluster's namespace and
// its stage objects is deleted (inside); every work is deleted with the
// deleteOption the teardown requires, once the agent applied it
// (orphan-first); only BestEffort forces, recording every forced object
// (forcing-recorded) and no more (forced-count). TestChecksFail shows each
// check failing on a history that breaks it.
//
// The kill points come from one seed, printed at the start and on failure.
// Replay a run with the same choices:
//
//	CRASH_SEED=<seed> go test ./test/crash/ -count=1 -v -run TestCrashSafety
//
// A seed fixes the choices (where each kill falls, counted in the operator's
// writes or in time since it came back, and the simulated agent's delays),
// not the scheduling of the processes: a replay kills at the same points of
// the teardown's progress, not at the same instants.
//
// TestCrashSafety also reads each teardown's record (internal/record) and
// checks it lists exactly what the audit log shows the operator deleted for
// that cluster, each once, done, groups in order, and nothing else
// (recorded); TestRecordCheckFails shows that check failing.
//
// CRASH_KILL_POINTS sets how many kill points each strategy gets at least
// (default 20); CRASH_ADDONS and CRASH_WORKS_PER_GROUP size each cluster
// (default 3 add-ons and 6 works in each of three cleanup-priority groups),
// CRASH_MINUTES the test's deadline (default 6). CRASH_MANAGER names a prebuilt manager binary to use instead
// of building cmd/. CRASH_KEEP=<dir> keeps the audit log and the managers'
// logs there.
package crash
