package main

import "testing"

// TestReadKnobs: what a run changes from the shipped defaults is read from
// the environment, said in one line, and bad values are refused by name.
func TestReadKnobs(t *testing.T) {
	t.Setenv("BENCH_APISERVER_FLAGS", "delete-collection-workers=16 --v=2")
	t.Setenv("BENCH_MANAGER_FLAGS", "--pprof-bind-address=127.0.0.1:6060")
	t.Setenv("BENCH_BARE_WAIT", "watch")
	t.Setenv("BENCH_CPUS", "split")
	t.Setenv("BENCH_PROFILE", "/tmp/profiles")
	k, err := readKnobs()
	if err != nil {
		t.Fatal(err)
	}
	want := "kube-apiserver --delete-collection-workers=16; kube-apiserver --v=2; manager --pprof-bind-address=127.0.0.1:6060 --pprof-bind-address=" + managerPprofAddress +
		"; bare loops wait by watch; kube-apiserver and etcd on CPUs " + controlPlaneCPUs() + ", the harness and the manager on " + clientCPUs() +
		"; CPU profiles of 6s from each teardown's start into /tmp/profiles"
	if got := k.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for key, bad := range map[string]string{"BENCH_APISERVER_FLAGS": "delete-collection-workers", "BENCH_BARE_WAIT": "poll",
		"BENCH_CPUS": "half", "BENCH_PROFILE_WINDOW": "10ms"} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, bad)
			if _, err := readKnobs(); err == nil {
				t.Errorf("%s=%s accepted", key, bad)
			}
		})
	}
	t.Setenv("BENCH_APISERVER_FLAGS", "")
	t.Setenv("BENCH_MANAGER_FLAGS", "")
	t.Setenv("BENCH_BARE_WAIT", "")
	t.Setenv("BENCH_CPUS", "")
	t.Setenv("BENCH_PROFILE", "")
	if k, err := readKnobs(); err != nil || k.String() != "" {
		t.Errorf("unset: %q, %v; want nothing", k, err)
	}
}
