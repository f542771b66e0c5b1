package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
)

// operatorNamespaceFlag adds --operator-namespace: where the operator
// publishes its settings and keeps its teardown records.
func (o *options) operatorNamespaceFlag(cmd *cobra.Command) *cobra.Command {
	cmd.Flags().StringVar(&o.settingsNamespace, "operator-namespace", "",
		"The operator's namespace, where it publishes its settings (ConfigMap "+settings.ConfigMapName+
			") and keeps its teardown records; empty: POD_NAMESPACE, else "+record.DefaultNamespace+".")
	return cmd
}

// operatorSettings reads the settings the operator publishes; when they
// cannot be read, it warns and returns the operator's defaults. records is
// the namespace of the teardown records the blast radius counts, empty
// (with a warning) when the user may not list them.
func (o *options) operatorSettings(ctx context.Context, c client.Reader) (s *settings.Settings, records string) {
	ns := record.Namespace(o.settingsNamespace)
	s, err := settings.Read(ctx, c, ns)
	if err != nil {
		fmt.Fprintf(o.streams.ErrOut, "Warning: the operator's settings could not be read (%v): the preview takes the "+
			"operator's default flags, which the running operator may not have.\n", err)
		s = settings.Defaults(ns)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	err = c.List(ctx, list, client.InNamespace(s.OperatorNamespace), client.MatchingLabels{record.RecordLabel: "true"}, client.Limit(1))
	if apierrors.IsForbidden(err) {
		fmt.Fprintf(o.streams.ErrOut, "Warning: the teardown records in %s could not be listed (%v): the blast radius counts "+
			"the clusters being deleted only, not the teardowns begun of clusters already gone.\n", s.OperatorNamespace, err)
		return s, ""
	}
	return s, s.OperatorNamespace
}
