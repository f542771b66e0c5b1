package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// version is the plugin's version, set at build time:
// go build -ldflags "-X main.version=v0.1.0". Empty: the module's version
// from the build info.
var version string

// pluginVersion is version, else the version Go stamped in the binary.
func pluginVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// managerLabels select the manager's Deployment, in every install.
var managerLabels = client.MatchingLabels{"app.kubernetes.io/name": "cleanup-operator", "control-plane": "controller-manager"}

// versionLabel is the label an install may set on the Deployment.
const versionLabel = "app.kubernetes.io/version"

// operatorVersion is the version of the operator that runs: a
// Deployment's, or, for an operator that is not one (run-local, a manager
// started by hand), the process's that keeps a heartbeat.
type operatorVersion struct {
	Version    string `json:"version"`
	Deployment string `json:"deployment,omitempty"`
	Image      string `json:"image,omitempty"`
	// Process is the heartbeat's holder (host and process id), and
	// Heartbeat its ConfigMap, namespace/name.
	Process   string `json:"process,omitempty"`
	Heartbeat string `json:"heartbeat,omitempty"`
	// live says it runs: a Deployment with replicas, or a live heartbeat.
	live bool
}

// where says which operator it is, for messages.
func (v *operatorVersion) where() string {
	if v.Deployment != "" {
		return "Deployment " + v.Deployment
	}
	return fmt.Sprintf("process %s, heartbeat %s", v.Process, v.Heartbeat)
}

// versions is what version prints.
type versions struct {
	Plugin   string           `json:"plugin"`
	Operator *operatorVersion `json:"operator,omitempty"`
}

var releaseTag = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$`)

// versionOf reads the version of the manager a Deployment runs: the tag of
// its manager container's image, as every install sets it, else the
// Deployment's app.kubernetes.io/version label (an image by digest).
func versionOf(d *appsv1.Deployment) operatorVersion {
	v := operatorVersion{Deployment: d.Namespace + "/" + d.Name}
	containers := d.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 && len(containers) > 0 {
		i = 0
	}
	if i >= 0 {
		v.Image = containers[i].Image
	}
	name := v.Image
	if at := strings.Index(name, "@"); at >= 0 {
		name = name[:at]
	}
	if colon := strings.LastIndex(name, ":"); colon > strings.LastIndex(name, "/") && releaseTag.MatchString(name[colon+1:]) {
		v.Version = name[colon+1:]
	} else {
		v.Version = d.Labels[versionLabel]
	}
	return v
}

// findOperator reads the version of the operator: in the namespace -n
// names, else in every namespace, else (where the user may not list
// Deployments or ConfigMaps in every namespace) in the default operator
// namespace. A Deployment with replicas comes first, then a process whose
// heartbeat is live, then a Deployment scaled to zero.
func (o *options) findOperator(ctx context.Context, c client.Reader) (*operatorVersion, error) {
	list := &appsv1.DeploymentList{}
	ns := o.namespace()
	err := c.List(ctx, list, managerLabels, client.InNamespace(ns))
	if ns == "" && apierrors.IsForbidden(err) {
		ns = record.Namespace("")
		err = c.List(ctx, list, managerLabels, client.InNamespace(ns))
	}
	if err != nil {
		return nil, fmt.Errorf("listing the operator's Deployments: %w", err)
	}
	// The one with replicas first, then by namespace and name (List's order).
	slices.SortStableFunc(list.Items, func(a, b appsv1.Deployment) int {
		return boolOrder(replicasOf(&b) > 0) - boolOrder(replicasOf(&a) > 0)
	})
	if len(list.Items) > 0 && replicasOf(&list.Items[0]) > 0 {
		v := versionOf(&list.Items[0])
		v.live = true
		return &v, nil
	}
	beats, err := o.liveBeats(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(beats) > 0 {
		b := beats[0]
		return &operatorVersion{Version: b.Version, Process: b.Holder, Heartbeat: b.Namespace + "/" + b.Name, live: true}, nil
	}
	if len(list.Items) > 0 {
		v := versionOf(&list.Items[0])
		return &v, nil
	}
	where := "in any namespace"
	if ns != "" {
		where = "in namespace " + ns
	}
	return nil, notFoundf("no Deployment of the operator (labels app.kubernetes.io/name=cleanup-operator, "+
		"control-plane=controller-manager) and no operator process with a live heartbeat (ConfigMap labelled %s=true) %s",
		heartbeat.Label, where)
}

// liveBeats are the heartbeats renewed recently, in the namespace -n
// names, else in every namespace, else in the default operator namespace;
// the latest renewed first.
func (o *options) liveBeats(ctx context.Context, c client.Reader) ([]heartbeat.Beat, error) {
	ns := o.namespace()
	beats, err := heartbeat.List(ctx, c, ns)
	if ns == "" && apierrors.IsForbidden(err) {
		beats, err = heartbeat.List(ctx, c, record.Namespace(""))
	}
	if err != nil {
		return nil, fmt.Errorf("listing the operator's heartbeats: %w", err)
	}
	now := time.Now()
	beats = slices.DeleteFunc(beats, func(b heartbeat.Beat) bool { return !b.Live(now) })
	slices.SortStableFunc(beats, func(a, b heartbeat.Beat) int { return b.Renewed.Compare(a.Renewed.Time) })
	return beats, nil
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// known says a version names a build: not empty, not a development one.
func known(v string) bool {
	return v != "" && v != "(devel)"
}

// sameVersion compares two versions with or without their leading v.
func sameVersion(a, b string) bool {
	return strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v")
}

// warnVersion warns once, on standard error, when the operator runs
// another version than the plugin's: the plugin decides with its own copy
// of the decision code. What cannot be read is not a warning.
func (o *options) warnVersion(c client.Reader) {
	if o.versionChecked {
		return
	}
	o.versionChecked = true
	plugin := pluginVersion()
	if !known(plugin) {
		return
	}
	op, err := o.findOperator(context.Background(), c)
	if err != nil || !known(op.Version) || sameVersion(op.Version, plugin) {
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "Warning: the operator runs version %s (%s), the plugin is %s: "+
		"the plugin's previews may differ from what the operator does. Install the plugin of the operator's version.\n",
		op.Version, op.where(), plugin)
}

// warnNotRunning warns, on standard error, when clusters are in cleanup
// and no operator runs: their cleanups move only while one does. What
// cannot be read is not a warning.
func (o *options) warnNotRunning(ctx context.Context, c client.Reader) {
	op, err := o.findOperator(ctx, c)
	var notFound *notFoundError
	switch {
	case errors.As(err, &notFound):
	case err != nil || op.live:
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "Warning: no operator runs (no Deployment of it with replicas, no operator process with a live "+
		"heartbeat): these cleanups move only while one runs.\n")
}

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the operator's",
		Long: `version prints the plugin's version and the version of the operator that runs
on the hub: the tag of its manager's image (else its Deployment's
` + versionLabel + ` label). The plugin takes its decisions with its
own copy of the operator's code: when the versions differ, its previews may
differ from what the operator does, and the other commands say so.

The operator's Deployment is looked for in the namespace -n names, else in
every namespace. An operator that is not a Deployment (run-local, a manager
started by hand) is found by its heartbeat: every operator process keeps a
ConfigMap labelled ` + heartbeat.Label + `=true in its namespace,
renewed every ` + heartbeat.DefaultInterval.String() + `, with its host, process id and
its binary's version as Go's build information knows it: the module version
Go stamped, else the VCS revision built (-dirty for a modified tree); for
go run, none, and the version is then unknown. --client prints the plugin's
version only, without connecting. The exit status is 3 when no operator is found.`,
		Example: `  kubectl cleanup version
  kubectl cleanup version --client
  kubectl cleanup version -n cleanup-operator-system -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			v := &versions{Plugin: pluginVersion()}
			var findErr error
			if !clientOnly {
				o.versionChecked = true // printed here, not warned
				c, err := o.client()
				if err != nil {
					return err
				}
				v.Operator, findErr = o.findOperator(cmd.Context(), c)
			}
			if err := o.print(v, func(w io.Writer) { printVersions(w, v, clientOnly) }); err != nil {
				return err
			}
			return findErr
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's version only, without connecting to the hub.")
	return cmd
}

func printVersions(w io.Writer, v *versions, clientOnly bool) {
	fmt.Fprintf(w, "Plugin:   %s\n", v.Plugin)
	switch {
	case clientOnly:
	case v.Operator == nil:
		fmt.Fprintf(w, "Operator: not found\n")
	case v.Operator.Deployment == "":
		fmt.Fprintf(w, "Operator: %s (%s; not a Deployment)\n", cmp.Or(v.Operator.Version, "unknown"), v.Operator.where())
	case v.Operator.Version == "":
		fmt.Fprintf(w, "Operator: unknown (Deployment %s, image %s)\n", v.Operator.Deployment, v.Operator.Image)
	default:
		fmt.Fprintf(w, "Operator: %s (Deployment %s, image %s)\n", v.Operator.Version, v.Operator.Deployment, v.Operator.Image)
	}
}
