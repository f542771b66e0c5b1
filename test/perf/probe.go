package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// userProbe is the probe's user: an ordinary reader, so that its requests
// go through the API server's priority and fairness as a hub's other
// clients' do (system:masters would be exempt).
const userProbe = "probe"

// probeEvery is how often the probe sends each request.
const probeEvery = 100 * time.Millisecond

// probeIdle is how long the probe measures before the clusters are deleted.
const probeIdle = 2 * time.Second

// latency is the p99 of the probe's GETs and LISTs over a span.
type latency struct {
	get, list time.Duration
	n         int
}

func (l latency) String() string {
	if l.n == 0 {
		return "no sample"
	}
	return fmt.Sprintf("GET %s, LIST %s (p99 of %d)", l.get.Round(100*time.Microsecond), l.list.Round(100*time.Microsecond), l.n)
}

// probeResult is the probe's latency while idle and during the teardown.
type probeResult struct{ idle, during latency }

func (p probeResult) String() string { return fmt.Sprintf("idle %s; during %s", p.idle, p.during) }

// sample is one probe round: when it began, and the two latencies.
type sample struct {
	at        time.Time
	get, list time.Duration
}

// probe GETs one ConfigMap and LISTs the ConfigMaps of kube-system every
// probeEvery, as a person's kubectl or a dashboard would, and keeps every
// latency.
type probe struct {
	mu      sync.Mutex
	samples []sample
	err     error
	done    chan struct{}
}

// startProbe grants the probe user get and list of ConfigMaps, creates
// the ConfigMap it reads, and starts it.
func startProbe(ctx context.Context, cp *controlPlane, admin client.Client) (*probe, error) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "perf-probe"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "perf-probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userProbe}},
	}
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "perf-probe", Namespace: "default"}}
	for _, o := range []client.Object{role, binding, target} {
		if err := admin.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	cfg, err := cp.user(userProbe)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := untilAllowed(ctx, cs); err != nil {
		return nil, err
	}
	p := &probe{done: make(chan struct{})}
	go p.run(ctx, cs)
	return p, nil
}

// untilAllowed waits until the API server's authorizer has seen the
// probe's new binding: its first GET succeeds.
func untilAllowed(ctx context.Context, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "perf-probe", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the probe user cannot read its ConfigMap: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *probe) run(ctx context.Context, cs kubernetes.Interface) {
	defer close(p.done)
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := sample{at: time.Now()}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "perf-probe", metav1.GetOptions{})
		s.get = time.Since(s.at)
		if err == nil {
			t := time.Now()
			_, err = cs.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
			s.list = time.Since(t)
		}
		p.mu.Lock()
		if err != nil && ctx.Err() == nil && p.err == nil {
			p.err = err
		}
		if err == nil {
			p.samples = append(p.samples, s)
		}
		p.mu.Unlock()
	}
}

// between is the p99 of the samples begun in [from, to).
func (p *probe) between(from, to time.Time) latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gets, lists []time.Duration
	for _, s := range p.samples {
		if !s.at.Before(from) && s.at.Before(to) {
			gets, lists = append(gets, s.get), append(lists, s.list)
		}
	}
	return latency{get: p99(gets), list: p99(lists), n: len(gets)}
}

// failed is the first error a probe request returned, if any.
func (p *probe) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// p99 is the 99th percentile (nearest rank) of ds; 0 for none.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n)
	return s[rank-1]
}
