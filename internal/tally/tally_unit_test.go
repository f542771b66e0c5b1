package tally

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestTallyWakesEveryPolicy touches more policies than any buffer would
// hold, before the source runs and while it runs, and expects each one
// queued: a wake-up is coalesced per policy, never dropped.
func TestTallyWakesEveryPolicy(t *testing.T) {
	tally := NewTally()
	const before, during = 5000, 3000
	for i := range before {
		tally.Touch(fmt.Sprintf("p-%d", i))
		tally.Touch(fmt.Sprintf("p-%d", i)) // twice: queued once
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := tally.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	for i := range during {
		tally.Touch(fmt.Sprintf("q-%d", i))
	}
	seen := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(seen) < before+during {
			req, shutdown := q.Get()
			if shutdown {
				return
			}
			seen[req.Name]++
			q.Done(req)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a dropped wake-up leaves Get waiting
		q.ShutDown()
		<-done
		t.Fatalf("%d of %d policies queued", len(seen), before+during)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s queued %d times", name, n)
		}
	}
	if _, ok := seen["p-0"]; !ok {
		t.Error("p-0 never queued")
	}
	tally.Touch("")
	if got := len(tally.takeDue()); got != 0 {
		t.Errorf("%d policies still due after all were queued", got)
	}
}
