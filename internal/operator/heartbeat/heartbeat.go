// Package heartbeat says which operator processes run on a hub, however
// they run: a Deployment's pods, run-local, a manager started by hand, in
// any namespace. Each process keeps a ConfigMap of its own in the
// operator's namespace, renews it every interval and deletes it when it
// stops; kubectl cleanup lists them and counts one renewed recently as an
// operator that runs. Every process publishes, whether it leads or not, and
// whether leader election is on or off.
//
// A ConfigMap rather than a Lease: wherever the operator runs it may write
// ConfigMaps in its namespace (its teardown records), while Leases only
// where an install grants it leader election.
package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

const (
	// Label, with the value "true", marks a heartbeat ConfigMap.
	Label = "cleanup.fleetops.dev/heartbeat"
	// NamePrefix begins the name of every heartbeat ConfigMap; the rest
	// is the process's identity.
	NamePrefix = "cleanup-operator-heartbeat-"
	// DataKey holds the Beat, as JSON.
	DataKey = "heartbeat.json"
	// DefaultInterval is how often a process renews its heartbeat.
	DefaultInterval = 20 * time.Second
	// Forget is how long after its last renewal a heartbeat left by a
	// process that did not stop cleanly is deleted, by the next process
	// to start in the namespace.
	Forget = time.Hour
)

// Beat is what a heartbeat ConfigMap says of its process.
type Beat struct {
	// Namespace and Name are the ConfigMap's.
	Namespace string `json:"-"`
	Name      string `json:"-"`
	// Holder is the process: its host name and process id.
	Holder string `json:"holder"`
	// Version is the operator binary's version as Go's build information
	// knows it (BuildVersion), if it knows one.
	Version string      `json:"version,omitempty"`
	Started metav1.Time `json:"started"`
	Renewed metav1.Time `json:"renewed"`
	// Interval is how often the process renews it.
	Interval metav1.Duration `json:"interval"`
}

// Live says whether the process renewed its heartbeat within three of its
// intervals of now: a missed renewal or two, or clocks a little apart, do
// not make a running process look stopped.
func (b *Beat) Live(now time.Time) bool {
	interval := b.Interval.Duration
	if interval <= 0 {
		interval = DefaultInterval
	}
	return now.Sub(b.Renewed.Time) < 3*interval
}

// Age is how long ago, by now, the heartbeat was renewed.
func (b *Beat) Age(now time.Time) time.Duration { return now.Sub(b.Renewed.Time) }

// Identity names this process: its host name (a pod's name, in a pod) and
// its process id, so that two managers on one machine differ.
func Identity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// BuildVersion is the binary's version as Go's build information knows
// it (versionOf), empty when it knows none.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return versionOf(info)
}

// versionOf is the main module's version when Go stamped one (a release,
// or the pseudo-version go build gives a commit); else the VCS revision
// Go stamped, with "-dirty" when the work tree had changes; else empty (go
// run, or a build without VCS information).
func versionOf(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision != "" && modified == "true" {
		return revision + "-dirty"
	}
	return revision
}

// Name is the name of the ConfigMap of the process identity names: a
// DNS subdomain, lower case, within 253 characters.
func Name(identity string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(identity) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	name := NamePrefix + strings.Trim(b.String(), "-.")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// List reads the heartbeats in namespace, every namespace when empty. A
// ConfigMap with the label that does not hold a heartbeat is left out.
func List(ctx context.Context, c client.Reader, namespace string) ([]Beat, error) {
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return nil, err
	}
	var out []Beat
	for _, cm := range list.Items {
		var b Beat
		if err := json.Unmarshal([]byte(cm.Data[DataKey]), &b); err != nil || b.Holder == "" {
			continue
		}
		b.Namespace, b.Name = cm.Namespace, cm.Name
		out = append(out, b)
	}
	return out, nil
}

// Publisher keeps the heartbeat of this process: it writes it at start,
// renews it every Interval and deletes it when the manager stops.
type Publisher struct {
	// Client reads and writes ConfigMaps in Namespace.
	Client    client.Client
	Namespace string
	// Identity names the process; empty: Identity().
	Identity string
	Version  string
	// Interval is how often the heartbeat is renewed; 0: DefaultInterval.
	Interval time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// process publishes its own, leader or not.
func (p *Publisher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (p *Publisher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("heartbeat")
	if p.Identity == "" {
		p.Identity = Identity()
	}
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	beat := Beat{Namespace: p.Namespace, Name: Name(p.Identity), Holder: p.Identity, Version: p.Version,
		Started: metav1.Now(), Interval: metav1.Duration{Duration: p.Interval}}
	p.forget(ctx, log)
	// A heartbeat, not a wait: renewed on a ticker until the manager stops.
	ticker := time.NewTicker(p.Interval)
	defer ticker.Stop()
	failing := false
	for {
		err := p.renew(ctx, &beat)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Error(err, "cannot write the heartbeat; kubectl cleanup may not see that this operator runs",
				"configMap", p.Namespace+"/"+beat.Name)
			failing = true
		case err == nil && failing:
			log.Info("heartbeat written again", "configMap", p.Namespace+"/"+beat.Name)
			failing = false
		}
		select {
		case <-ctx.Done():
			p.remove(log, beat.Name)
			return nil
		case <-ticker.C:
		}
	}
}

// renew writes the heartbeat, renewed now.
func (p *Publisher) renew(ctx context.Context, beat *Beat) error {
	beat.Renewed = metav1.Now()
	raw, err := json.Marshal(beat)
	if err != nil {
		return err
	}
	cm := corev1ac.ConfigMap(beat.Name, p.Namespace).
		WithLabels(map[string]string{Label: "true"}).
		WithData(map[string]string{DataKey: string(raw)})
	return p.Client.Apply(ctx, cm, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
}

// remove deletes the heartbeat once the manager stops: its context is
// done, so the delete has a few seconds of its own.
func (p *Publisher) remove(log logr.Logger, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name}}
	if err := p.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		log.Error(err, "cannot delete the heartbeat; kubectl cleanup counts this operator as running until it is stale",
			"configMap", p.Namespace+"/"+name)
	}
}

// forget deletes the heartbeats in the namespace last renewed more than
// Forget ago: left by processes that did not stop cleanly.
func (p *Publisher) forget(ctx context.Context, log logr.Logger) {
	beats, err := List(ctx, p.Client, p.Namespace)
	if err != nil {
		log.Error(err, "cannot list the heartbeats of stopped processes")
		return
	}
	for _, b := range beats {
		if b.Age(time.Now()) < Forget {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}
		if err := p.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			log.Error(err, "cannot delete a stale heartbeat", "configMap", b.Namespace+"/"+b.Name)
		}
	}
}
