package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
)

// Completion: kubectl (1.26 and later) completes `kubectl cleanup ...` by
// running kubectl_complete-cleanup from PATH, which runs this binary's
// __complete command. Commands and flags complete from the command tree;
// the functions here complete what only the hub knows. Completion never
// warns and never fails: what cannot be read completes nothing.

// completionClient connects without the version check.
func (o *options) completionClient() client.Client {
	o.versionChecked = true
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil
	}
	return c
}

// names lists the names of the objects of a list kind, with a prefix.
func names(c client.Client, gvkList schema.GroupVersionKind, prefix string, opts ...client.ListOption) []string {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvkList)
	if err := c.List(context.Background(), list, opts...); err != nil {
		return nil
	}
	var out []string
	for _, item := range list.Items {
		if strings.HasPrefix(item.Name, prefix) {
			out = append(out, item.Name)
		}
	}
	return out
}

// completeClusters completes the name of a ManagedCluster.
func (o *options) completeClusters(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c := o.completionClient()
	if c == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names(c, schema.GroupVersionKind{Group: managedClusterGVK.Group, Version: managedClusterGVK.Version,
		Kind: "ManagedClusterList"}, prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeRecords completes the name of a teardown record, or of a
// cluster that has one, in the operator's namespace.
func (o *options) completeRecords(flag *string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		ns, err := o.operatorNamespace(*flag)
		if len(args) > 0 || err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c := o.completionClient()
		if c == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cms := &metav1.PartialObjectMetadataList{}
		cms.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := c.List(context.Background(), cms, client.InNamespace(ns), client.HasLabels{record.RecordLabel}); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, cm := range cms.Items {
			if !record.IsRecord(&cm) {
				continue
			}
			out = append(out, cm.Name)
			// A label of 63 characters may be a longer name cut.
			if cluster := cm.Labels[record.ClusterLabel]; cluster != "" && len(cluster) < 63 {
				out = append(out, cluster)
			}
		}
		out = slices.DeleteFunc(out, func(s string) bool { return !strings.HasPrefix(s, prefix) })
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}

// registerCompletions completes the values of the shared flags.
func (o *options) registerCompletions(root *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	_ = root.RegisterFlagCompletionFunc("output", fixed("json", "yaml"))
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		c := o.completionClient()
		if c == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(c, schema.GroupVersionKind{Version: "v1", Kind: "NamespaceList"}, prefix), cobra.ShellCompDirectiveNoFileComp
	})
}
