package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// bareLoop deletes what the others delete, in the same order, with nothing
// else: per cluster (all at once), each group (the add-ons, then the works
// of each cleanup priority, lowest first), waiting until the group is gone,
// then the namespace. inFlight bounds the deletes in flight per cluster;
// style says whether a group goes in one deletecollection.
func bareLoop(inFlight int, style bareGroups) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		cfg, err := r.cp.user(userBare, "system:masters")
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0 // no client-side limit
		bare, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return &instance{
			pid: os.Getpid(), inProcess: true,
			teardown: func(ctx context.Context) error {
				errs := make(chan error, r.fleet.clusters)
				for i := range r.fleet.clusters {
					ns := clusterName(i)
					go func() { errs <- bareCluster(ctx, bare, kube, ns, inFlight, style, r.p.bareWaitsByWatch) }()
				}
				var first error
				for range r.fleet.clusters {
					first = firstErr(first, <-errs)
				}
				return first
			},
			stop: func() {},
		}, nil
	}
}

// bareGroups says how the bare loop sends a group.
type bareGroups int

const (
	eachOne        bareGroups = iota // every object in a delete of its own
	eachGroupInOne                   // each group of a resource in one deletecollection (of minCollection or more) leaving the later ones out by name
)

// minCollection is the fewest objects the operator deletes in one
// deletecollection (decision.MinCollection): a smaller group goes one by
// one; maxLeftOut the most it leaves out by name (decision.MaxLeftOut).
const (
	minCollection = 2
	maxLeftOut    = 256
)

// priorities are the fleet's cleanup priorities, lowest first (absent: "").
var priorities = []string{"", "10", "20"}

func bareCluster(ctx context.Context, bare metadata.Interface, kube kubernetes.Interface, ns string, inFlight int, style bareGroups, byWatch bool) error {
	for _, gvr := range []string{"addons", "works"} {
		res := bare.Resource(addonGVR).Namespace(ns)
		if gvr == "works" {
			res = bare.Resource(workGVR).Namespace(ns)
		}
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		// Group by cleanup priority, lowest first (absent: 0).
		groups := map[string][]string{}
		for _, item := range list.Items {
			prio := item.Annotations[cleanupPriority]
			groups[prio] = append(groups[prio], item.Name)
		}
		for i, prio := range priorities {
			names := groups[prio]
			if len(names) == 0 {
				continue
			}
			var later []fields.Selector
			for _, p := range priorities[i+1:] {
				for _, n := range groups[p] {
					later = append(later, fields.OneTermNotEqualSelector("metadata.name", n))
				}
			}
			var err error
			if style == eachGroupInOne && len(names) >= minCollection && len(later) <= maxLeftOut {
				err = res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: fields.AndSelectors(later...).String()})
			} else {
				err = deleteEach(ctx, res, names, inFlight)
			}
			if err != nil {
				return err
			}
			if err := waitGone(ctx, res, prio, byWatch); err != nil {
				return err
			}
		}
	}
	return kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// deleteEach deletes the named objects, up to inFlight at a time, and
// returns the first error (an object already gone is none).
func deleteEach(ctx context.Context, res metadata.ResourceInterface, names []string, inFlight int) error {
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, len(names))
	for _, name := range names {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			err := res.Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs <- err
			}
		}()
	}
	for range inFlight {
		sem <- struct{}{}
	}
	close(errs)
	return <-errs
}

// waitGone waits until no object of the cleanup priority prio remains:
// a list every 20 ms, or byWatch a list, then a watch from it.
func waitGone(ctx context.Context, res metadata.ResourceInterface, prio string, byWatch bool) error {
	for {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		remaining := map[string]bool{}
		for _, item := range list.Items {
			if item.Annotations[cleanupPriority] == prio {
				remaining[item.Name] = true
			}
		}
		if len(remaining) == 0 {
			return nil
		}
		if !byWatch {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err := watchGone(ctx, res, list.ResourceVersion, remaining); err != nil {
			return err
		}
		// The watch ended (it may, at any time): list again.
	}
}

// watchGone watches from resourceVersion until every name of remaining is
// deleted or the watch ends.
func watchGone(ctx context.Context, res metadata.ResourceInterface, resourceVersion string, remaining map[string]bool) error {
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: resourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for len(remaining) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if m, isMeta := ev.Object.(*metav1.PartialObjectMetadata); isMeta && ev.Type == watch.Deleted {
				delete(remaining, m.Name)
			}
		}
	}
	return nil
}

// withAdmission creates the operator's admission policies and bindings as
// config/admission ships them, waits until they have been in force for
// admissionSettle, then starts the contender.
func withAdmission(start func(ctx context.Context, r *run) (*instance, error)) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		files, err := filepath.Glob(filepath.Join(r.p.root, "config", "admission", "*.yaml"))
		if err != nil {
			return nil, err
		}
		n := 0
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			objs, err := yamlDocs[unstructured.Unstructured](f)
			if err != nil {
				return nil, err
			}
			for i := range objs {
				if err := r.admin.Create(ctx, &objs[i]); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("no admission policies in %s", filepath.Join(r.p.root, "config", "admission"))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(admissionSettle):
		}
		return start(ctx, r)
	}
}

// withWorkWatch starts a watch of every ManifestWork as the bare loop's
// user, whole objects or (metadataOnly) their metadata, and reads its
// events until the contender stops: the API server encodes and sends each
// event, as it does for the operator's cache.
func withWorkWatch(metadataOnly bool, start func(ctx context.Context, r *run) (*instance, error)) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		cfg, err := r.cp.user(userBare, "system:masters")
		if err != nil {
			return nil, err
		}
		var works interface {
			Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
		}
		if metadataOnly {
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			works = mc.Resource(workGVR)
		} else {
			dc, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			works = dc.Resource(workGVR)
		}
		w, err := works.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		go func() {
			for range w.ResultChan() {
			}
		}()
		inst, err := start(ctx, r)
		if err != nil {
			w.Stop()
			return nil, err
		}
		stop := inst.stop
		inst.stop = func() { w.Stop(); stop() }
		return inst, nil
	}
}
