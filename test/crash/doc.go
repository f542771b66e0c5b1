// Package crash proves that a cluster teardown survives the manager running
// it. The manager runs as a real process (cmd/main.go, built by the test) on
// a real kube-apiserver and etcd. TestCrashSafety kills it with SIGKILL at
// random points of teardowns of each remove strategy (Required, BestEffort,
// Needless) and restarts it until they end; TestLeaderFailover runs two
// managers with leader election and kills the leader mid-teardown. The API
// server's audit log is the witness: every teardown ends, and the operator
// deleted nothing out of order, nothing twice, and nothing but the cluster's
// content and its namespace.
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
// CRASH_KILL_POINTS sets how many kill points each strategy gets at least
// (default 20). CRASH_MANAGER names a prebuilt manager binary to use instead
// of building cmd/. CRASH_KEEP=<dir> keeps the audit log and the managers'
// logs there.
package crash
