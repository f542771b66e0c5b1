// Package flowcontrol creates the FlowSchema and PriorityLevelConfiguration
// that put the operator's requests in a priority level of their own, when
// they are absent.
//
// The manager's client-side rate limit is sized so that it does not bind a
// teardown: the API server's Priority and Fairness protects the server and
// its other clients instead. The priority level is limited (a share of the
// server's concurrency, lending half of it when idle and borrowing at most as
// much again), and it queues: excess requests wait in fair queues, one flow
// per namespace, so that one cluster's teardown does not starve another's,
// nor the operator's leader-election Lease.
package flowcontrol
