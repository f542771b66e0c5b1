package review

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	webhook "github.com/fleetops-dev/cleanup-operator/internal/webhook/v1alpha1"
)

var configMapsGR = schema.GroupResource{Resource: "configmaps"}

// takeOperator reads what the operator's flags change of its decisions,
// from the settings it publishes in its namespace, and the metadata of its
// teardown records there, which the blast radius counts. What cannot be
// read is said in h.Warnings: the settings are then the binary's defaults,
// and without the records the budget counts the clusters being deleted
// only, not the teardowns of clusters already gone.
func (h *Hub) takeOperator(ctx context.Context, c client.Reader, namespace string) error {
	s, err := settings.Read(ctx, c, namespace)
	if err != nil {
		s = settings.Defaults(namespace)
		h.Warnings = append(h.Warnings, fmt.Sprintf("the operator's settings could not be read (%v): the decisions take the "+
			"operator's default flags, which the running operator may not have", err))
	}
	h.Operator = s
	if slices.Contains(h.Listed, configMapsGR.String()) {
		// Every ConfigMap's metadata is taken already, the records' too.
		h.Records = s.OperatorNamespace
		return nil
	}
	return h.takeRecords(ctx, c, h.Operator.OperatorNamespace)
}

// takeRecords takes the metadata the blast radius reads of the teardown
// records: their labels and their start, policy and end annotations.
func (h *Hub) takeRecords(ctx context.Context, c client.Reader, namespace string) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{record.RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy})
	if apierrors.IsForbidden(err) {
		h.Warnings = append(h.Warnings, fmt.Sprintf("the teardown records in %s could not be listed (%v): the blast radius counts "+
			"the clusters being deleted only, not the teardowns begun of clusters already gone", namespace, err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	h.Records = namespace
	for i := range list.Items {
		cm := &list.Items[i]
		m := metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, Labels: cm.Labels, Annotations: map[string]string{}}
		for _, k := range record.MetaAnnotations {
			if v, ok := cm.Annotations[k]; ok {
				m.Annotations[k] = v
			}
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&metav1.PartialObjectMetadata{ObjectMeta: m})
		if err != nil {
			return err
		}
		obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
		h.Objects = append(h.Objects, obj)
	}
	return nil
}

// warnWindows warns of the live policies whose blast-radius window is
// longer than the operator keeps its records: admitted before the records'
// age was lowered, their budgets count fewer teardowns than began.
func (h *Hub) warnWindows(live []unstructured.Unstructured) {
	for i := range live {
		p, errs := cel.DecodePolicy(live[i].Object)
		if len(errs) > 0 || p == nil {
			continue
		}
		if errs := webhook.CheckWindow(p.Spec.BlastRadius, h.Operator.TeardownRecordMaxAge.Duration); len(errs) > 0 {
			h.Warnings = append(h.Warnings, fmt.Sprintf("CleanupPolicy %s: %s", p.Name, errs.ToAggregate()))
		}
	}
}
