package settings

import (
	"context"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Publisher writes the settings of the operator that leads into its
// namespace, once it leads: the replica that decides is the one whose
// settings the plugin reads.
type Publisher struct {
	// Client writes; Reader reads from the API server (the operator's
	// cache keeps ConfigMaps as metadata).
	Client   client.Client
	Reader   client.Reader
	Settings *Settings
	// Retry is how soon a failed write is tried again first, doubling up
	// to five minutes; 0: 5s.
	Retry time.Duration
}

// Start implements manager.Runnable: it writes the settings, trying again
// until it succeeds or the manager stops.
func (p *Publisher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("settings")
	retry := p.Retry
	if retry <= 0 {
		retry = 5 * time.Second
	}
	backoff := wait.Backoff{Duration: retry, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Minute}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := p.publish(ctx); err != nil {
			log.Error(err, "cannot publish the operator's settings; kubectl cleanup previews with the plugin's defaults")
			return false, nil
		}
		log.Info("settings published", "configMap", p.Settings.OperatorNamespace+"/"+ConfigMapName)
		return true, nil
	})
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *Publisher) NeedLeaderElection() bool { return true }

// publish creates the ConfigMap, or replaces its data.
func (p *Publisher) publish(ctx context.Context) error {
	want, err := p.Settings.ConfigMap()
	if err != nil {
		return err
	}
	err = p.Client.Create(ctx, want)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	got := &corev1.ConfigMap{}
	if err := p.Reader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return err
	}
	got.Data = want.Data
	return p.Client.Update(ctx, got)
}
