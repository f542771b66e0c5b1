package testenv

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

// Operator is the operator's manager running in this process against the
// control plane, set up as cmd/main.go sets it up, webhook included.
type Operator struct {
	*operator.Operator
	cancel context.CancelFunc
	done   chan error
}

// StartOperator starts the manager with the identity of cfg (nil: the
// administrator) and returns once its webhook serves. A process may start
// it again after Stop.
func (e *Env) StartOperator(ctx context.Context, cfg *rest.Config) (*Operator, error) {
	return e.StartOperatorWith(ctx, cfg, operator.Options{})
}

// StartOperatorWith is StartOperator with the operator's options (the
// webhook is always enabled).
func (e *Env) StartOperatorWith(ctx context.Context, cfg *rest.Config, setup operator.Options) (*Operator, error) {
	if cfg == nil {
		cfg = e.Config
	}
	opts := e.ManagerOptions(operator.ManagerOptions())
	// A restarted manager registers controllers of the same names.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	setup.EnableWebhooks = true
	op, err := operator.Setup(mgrCtx, mgr, setup)
	if err != nil {
		cancel()
		return nil, err
	}
	o := &Operator{Operator: op, cancel: cancel, done: make(chan error, 1)}
	go func() { o.done <- mgr.Start(mgrCtx) }()
	if err := e.WaitForWebhook(ctx); err != nil {
		_ = o.Stop()
		return nil, err
	}
	return o, nil
}

// Stop stops the manager and returns once it has stopped, with the error
// it stopped with.
func (o *Operator) Stop() error {
	o.cancel()
	return <-o.done
}

// Exited delivers the manager's error when it stops on its own. Once it has,
// Stop must not be called.
func (o *Operator) Exited() <-chan error { return o.done }
