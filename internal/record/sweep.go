package record

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Sweeper applies the retention to every record at start and then every
// Every, so that records past their age go even when no teardown ends.
// It runs on the leader only.
type Sweeper struct {
	Client    client.Client
	Namespace string
	Retention Retention
	Every     time.Duration
}

// Start implements manager.Runnable.
func (s *Sweeper) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("teardown-records")
	every := s.Every
	if every <= 0 {
		every = time.Hour
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pruned, err := Prune(ctx, s.Client, s.Namespace, "", s.Retention, time.Now())
		if err != nil {
			log.Error(err, "pruning teardown records")
		} else if len(pruned) > 0 {
			log.Info("teardown records pruned", "records", pruned)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *Sweeper) NeedLeaderElection() bool { return true }
