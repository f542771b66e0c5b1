package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Where the generator reads and writes, relative to the repository root.
const (
	ManifestsSource = "config/manifests"
	BundleDir       = "bundle"
	DockerfilePath  = "bundle.Dockerfile"
)

// Options are the inputs of Generate besides what config/manifests builds.
type Options struct {
	// Root is the repository root.
	Root string
	// Version is the operator's semantic version, without a leading v.
	Version string
	// Image replaces the manager container's image; empty keeps the one
	// config/manifests names.
	Image string
	// Channels are the channels the bundle is published to.
	Channels []string
	// DefaultChannel is the package's default channel; one of Channels.
	DefaultChannel string
}

func (o Options) validate() error {
	if _, err := semver.Parse(o.Version); err != nil {
		return fmt.Errorf("version %q is not a semantic version (no leading v): %w", o.Version, err)
	}
	if len(o.Channels) == 0 {
		return errors.New("at least one channel is needed")
	}
	if o.DefaultChannel != "" && !slices.Contains(o.Channels, o.DefaultChannel) {
		return fmt.Errorf("default channel %q is not one of the channels %v", o.DefaultChannel, o.Channels)
	}
	return nil
}

// File is one generated file; Path is relative to the repository root.
type File struct {
	Path string
	Data []byte
}

// Note says what became of an object of config/manifests that the bundle
// does not carry as a manifest of its own.
type Note struct {
	Object string
	Reason string
}

// Bundle is what Generate produces.
type Bundle struct {
	// CSVName is the ClusterServiceVersion's name, <package>.v<version>.
	CSVName string
	// Package is the OLM package name, from the base CSV's name.
	Package string
	// Files are the bundle's files, sorted by path.
	Files []File
	// InCSV lists the objects folded into the CSV.
	InCSV []Note
	// LeftOut lists the objects the bundle does not carry at all, and why.
	LeftOut []Note
}

// Kinds a registry+v1 bundle may carry besides the CSV and CRDs, with
// whether they are namespaced. The tests check this list against
// operator-registry's; the generator does not import operator-registry so
// that `make bundle` builds quickly.
var bundleKinds = map[string]bool{
	"ClusterRole":           false,
	"ClusterRoleBinding":    false,
	"ConfigMap":             true,
	"ConsoleCLIDownload":    false,
	"ConsoleLink":           false,
	"ConsolePlugin":         false,
	"ConsoleQuickStart":     false,
	"ConsoleYAMLSample":     false,
	"NetworkPolicy":         true,
	"PodDisruptionBudget":   true,
	"PodMonitor":            true,
	"PriorityClass":         false,
	"PrometheusRule":        true,
	"Role":                  true,
	"RoleBinding":           true,
	"Secret":                true,
	"Service":               true,
	"ServiceAccount":        true,
	"ServiceMonitor":        true,
	"VerticalPodAutoscaler": false,
}

// leftOutKinds are kinds config/manifests builds that a bundle cannot carry
// or that OLM provides itself, keyed by group/kind.
var leftOutKinds = map[string]string{
	"/Namespace": "OLM installs the operator into the namespace of the OperatorGroup",
	"cert-manager.io/Issuer": "OLM issues the webhook serving certificate and mounts it at " +
		"/tmp/k8s-webhook-server/serving-certs (tls.crt, tls.key)",
	"cert-manager.io/Certificate": "OLM issues the webhook serving certificate and mounts it at " +
		"/tmp/k8s-webhook-server/serving-certs (tls.crt, tls.key)",
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy": "a bundle cannot carry this kind; " +
		"the operator creates it at start (internal/admissionpolicy), as its cluster permissions allow",
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": "a bundle cannot carry this kind; " +
		"the operator creates it at start (internal/admissionpolicy), as its cluster permissions allow",
}

// Generate renders the bundle from the kustomize build of config/manifests.
func Generate(o Options) (*Bundle, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	objs, err := kustomizeBuild(filepath.Join(o.Root, ManifestsSource))
	if err != nil {
		return nil, err
	}
	return assemble(o, objs)
}

// generator holds the state of one assembly.
type generator struct {
	opts Options
	objs []*unstructured.Unstructured

	base        *v1alpha1.ClusterServiceVersion
	pkg         string
	crds        []*apiextensionsv1.CustomResourceDefinition
	deployments []*unstructured.Unstructured
	// serviceAccounts are the manager service accounts: namespace/name.
	serviceAccounts map[string]bool
	// done marks the objects already placed, by objectKey.
	done map[string]bool

	bundle    *Bundle
	manifests map[string][]byte
}

func assemble(o Options, objs []*unstructured.Unstructured) (*Bundle, error) {
	g := &generator{
		opts:            o,
		objs:            objs,
		serviceAccounts: map[string]bool{},
		done:            map[string]bool{},
		bundle:          &Bundle{},
		manifests:       map[string][]byte{},
	}
	csv, err := g.run()
	if err != nil {
		return nil, err
	}
	csvData, err := renderCSV(csv, g.deployments)
	if err != nil {
		return nil, err
	}
	g.manifests[g.pkg+".clusterserviceversion.yaml"] = csvData
	for name, data := range g.manifests {
		g.bundle.Files = append(g.bundle.Files, File{Path: BundleDir + "/manifests/" + name, Data: data})
	}
	g.bundle.Files = append(g.bundle.Files,
		File{Path: BundleDir + "/metadata/annotations.yaml", Data: renderAnnotations(g.annotations())},
		File{Path: DockerfilePath, Data: renderDockerfile(g.annotations())},
	)
	sort.Slice(g.bundle.Files, func(i, j int) bool { return g.bundle.Files[i].Path < g.bundle.Files[j].Path })
	sortNotes(g.bundle.InCSV)
	sortNotes(g.bundle.LeftOut)
	return g.bundle, nil
}

func (g *generator) run() (*v1alpha1.ClusterServiceVersion, error) {
	if err := g.readBase(); err != nil {
		return nil, err
	}
	if err := g.readCRDs(); err != nil {
		return nil, err
	}
	if err := g.readDeployments(); err != nil {
		return nil, err
	}
	csv := g.base.DeepCopy()
	csv.Name = g.pkg + ".v" + g.opts.Version
	csv.Namespace = ""
	csv.Spec.Version = version.OperatorVersion{Version: semver.MustParse(g.opts.Version)}
	g.bundle.CSVName, g.bundle.Package = csv.Name, g.pkg

	owned, err := g.ownedCRDs()
	if err != nil {
		return nil, err
	}
	csv.Spec.CustomResourceDefinitions.Owned = owned

	examples, err := g.examples()
	if err != nil {
		return nil, err
	}
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	csv.Annotations["alm-examples"] = examples

	deployments, images, err := g.installDeployments()
	if err != nil {
		return nil, err
	}
	if len(images) > 0 {
		csv.Annotations["containerImage"] = images[0].Image
	}
	csv.Spec.RelatedImages = images

	permissions, clusterPermissions, err := g.permissions()
	if err != nil {
		return nil, err
	}
	webhooks, err := g.webhooks()
	if err != nil {
		return nil, err
	}
	csv.Spec.WebhookDefinitions = webhooks
	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{
		StrategyName: v1alpha1.InstallStrategyNameDeployment,
		StrategySpec: v1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    deployments,
			Permissions:        permissions,
			ClusterPermissions: clusterPermissions,
		},
	}
	if err := g.rest(); err != nil {
		return nil, err
	}
	return csv, nil
}

// readBase finds the base CSV and takes the package name from it.
func (g *generator) readBase() error {
	var bases []*unstructured.Unstructured
	for _, u := range g.objs {
		if u.GetKind() == v1alpha1.ClusterServiceVersionKind {
			bases = append(bases, u)
		}
	}
	if len(bases) != 1 {
		return fmt.Errorf("%s builds %d ClusterServiceVersions, want the one base", ManifestsSource, len(bases))
	}
	g.base = &v1alpha1.ClusterServiceVersion{}
	if err := strictConvert(bases[0].Object, g.base); err != nil {
		return fmt.Errorf("base ClusterServiceVersion: %w", err)
	}
	pkg, _, ok := strings.Cut(g.base.Name, ".v")
	if !ok || pkg == "" {
		return fmt.Errorf("base ClusterServiceVersion %q: the name must be <package>.v<version>", g.base.Name)
	}
	g.pkg = pkg
	if g.base.Spec.MinKubeVersion == "" {
		return errors.New("base ClusterServiceVersion: spec.minKubeVersion must be set")
	}
	if len(g.base.Spec.InstallModes) == 0 {
		return errors.New("base ClusterServiceVersion: spec.installModes must be set")
	}
	// The validators let an unknown install mode type through.
	for _, m := range g.base.Spec.InstallModes {
		switch m.Type {
		case v1alpha1.InstallModeTypeOwnNamespace, v1alpha1.InstallModeTypeSingleNamespace,
			v1alpha1.InstallModeTypeMultiNamespace, v1alpha1.InstallModeTypeAllNamespaces:
		default:
			return fmt.Errorf("base ClusterServiceVersion: unknown install mode type %q", m.Type)
		}
	}
	g.done[objectKey(bases[0])] = true
	return nil
}

// readCRDs writes every CRD as a manifest of its own.
func (g *generator) readCRDs() error {
	for _, u := range g.objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if u.GetAPIVersion() != apiextensionsv1.SchemeGroupVersion.String() {
			return fmt.Errorf("%s: only %s CRDs are supported", objectKey(u), apiextensionsv1.SchemeGroupVersion)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := fromUnstructured(u, crd); err != nil {
			return err
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
			return fmt.Errorf("%s: conversion webhooks are not supported by this generator", objectKey(u))
		}
		g.crds = append(g.crds, crd)
		if err := g.addManifest(crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml", u); err != nil {
			return err
		}
	}
	sort.Slice(g.crds, func(i, j int) bool { return g.crds[i].Name < g.crds[j].Name })
	return nil
}

// readDeployments finds the deployments and their service accounts.
func (g *generator) readDeployments() error {
	for _, u := range g.objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		if u.GetAPIVersion() != appsv1.SchemeGroupVersion.String() {
			return fmt.Errorf("%s: want apiVersion %s", objectKey(u), appsv1.SchemeGroupVersion)
		}
		sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
		if sa == "" {
			return fmt.Errorf("%s: spec.template.spec.serviceAccountName must be set: the CSV's permissions name it", objectKey(u))
		}
		g.serviceAccounts[u.GetNamespace()+"/"+sa] = true
		g.deployments = append(g.deployments, u)
		g.done[objectKey(u)] = true
	}
	if len(g.deployments) == 0 {
		return fmt.Errorf("%s builds no Deployment", ManifestsSource)
	}
	return nil
}

// ownedCRDs completes the base CSV's owned CRDs from the CRDs: one entry per
// served version, each described in the base, whose descriptors name fields
// that the version's schema has.
func (g *generator) ownedCRDs() ([]v1alpha1.CRDDescription, error) {
	type key struct{ name, version string }
	described := map[key]v1alpha1.CRDDescription{}
	for _, d := range g.base.Spec.CustomResourceDefinitions.Owned {
		if _, dup := described[key{d.Name, d.Version}]; dup {
			return nil, fmt.Errorf("base ClusterServiceVersion describes %s %s twice", d.Name, d.Version)
		}
		described[key{d.Name, d.Version}] = d
	}
	var owned []v1alpha1.CRDDescription
	for _, crd := range g.crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			k := key{crd.Name, v.Name}
			d, ok := described[k]
			if !ok {
				return nil, fmt.Errorf("base ClusterServiceVersion: describe CRD %s version %s under spec.customresourcedefinitions.owned", crd.Name, v.Name)
			}
			delete(described, k)
			if d.Kind == "" {
				d.Kind = crd.Spec.Names.Kind
			}
			if d.Kind != crd.Spec.Names.Kind {
				return nil, fmt.Errorf("base ClusterServiceVersion: %s %s has kind %s, the CRD says %s", d.Name, d.Version, d.Kind, crd.Spec.Names.Kind)
			}
			if d.Description == "" && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				d.Description = v.Schema.OpenAPIV3Schema.Description
			}
			if err := checkDescriptors(d, v); err != nil {
				return nil, err
			}
			owned = append(owned, d)
		}
	}
	if len(described) > 0 {
		var stale []string
		for k := range described {
			stale = append(stale, k.name+" "+k.version)
		}
		sort.Strings(stale)
		return nil, fmt.Errorf("base ClusterServiceVersion describes CRDs %s builds no served version of: %s", ManifestsSource, strings.Join(stale, ", "))
	}
	return owned, nil
}

// examples renders alm-examples: every object of an owned kind, in the
// order the kustomizations list them.
func (g *generator) examples() (string, error) {
	ownedKinds := map[string]bool{}
	for _, crd := range g.crds {
		ownedKinds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
	}
	examples := []map[string]any{}
	for _, u := range g.objs {
		if !ownedKinds[u.GroupVersionKind().Group+"/"+u.GetKind()] {
			continue
		}
		examples = append(examples, u.Object)
		g.done[objectKey(u)] = true
		g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "alm-examples"})
	}
	if len(examples) == 0 {
		return "", fmt.Errorf("%s builds no sample of an owned CRD for alm-examples", ManifestsSource)
	}
	data, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// certSecrets are the secrets cert-manager writes serving certificates to.
func (g *generator) certSecrets() map[string]bool {
	secrets := map[string]bool{}
	for _, u := range g.objs {
		if u.GroupVersionKind().Group == "cert-manager.io" && u.GetKind() == "Certificate" {
			if name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName"); name != "" {
				secrets[u.GetNamespace()+"/"+name] = true
			}
		}
	}
	return secrets
}

// installDeployments turns the deployments into the CSV's install
// deployments: without the cert-manager certificate volumes (OLM mounts its
// own certificate where controller-runtime looks by default), with the
// manager image replaced when Options.Image is set. It returns the images
// the deployments run, the manager's first.
func (g *generator) installDeployments() ([]v1alpha1.StrategyDeploymentSpec, []v1alpha1.RelatedImage, error) {
	secrets := g.certSecrets()
	var specs []v1alpha1.StrategyDeploymentSpec
	var images []v1alpha1.RelatedImage
	seen := map[string]bool{}
	for _, u := range g.deployments {
		if err := stripCertVolumes(u, secrets); err != nil {
			return nil, nil, err
		}
		if g.opts.Image != "" {
			if err := setManagerImage(u, g.opts.Image); err != nil {
				return nil, nil, err
			}
		}
		d := &appsv1.Deployment{}
		if err := fromUnstructured(u, d); err != nil {
			return nil, nil, err
		}
		specs = append(specs, v1alpha1.StrategyDeploymentSpec{
			Name:  d.Name,
			Spec:  d.Spec,
			Label: labels.Set(d.Labels),
		})
		manager := managerContainer(d.Spec.Template)
		containers := slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers)
		sort.SliceStable(containers, func(i, j int) bool { return containers[i].Name == manager && containers[j].Name != manager })
		for _, c := range containers {
			if !seen[c.Image] {
				seen[c.Image] = true
				images = append(images, v1alpha1.RelatedImage{Name: c.Name, Image: c.Image})
			}
		}
	}
	return specs, images, nil
}

// managerContainer is the name of the pod's main container: the one
// kubectl.kubernetes.io/default-container names, or the only one.
func managerContainer(t corev1.PodTemplateSpec) string {
	if name := t.Annotations["kubectl.kubernetes.io/default-container"]; name != "" {
		return name
	}
	if len(t.Spec.Containers) == 1 {
		return t.Spec.Containers[0].Name
	}
	return ""
}

// setManagerImage sets the image of the deployment's manager container.
func setManagerImage(u *unstructured.Unstructured, image string) error {
	d := &appsv1.Deployment{}
	if err := fromUnstructured(u, d); err != nil {
		return err
	}
	name := managerContainer(d.Spec.Template)
	if name == "" {
		return fmt.Errorf("%s: cannot tell the manager container: set kubectl.kubernetes.io/default-container", objectKey(u))
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for i, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == name {
			m["image"] = image
			containers[i] = m
		}
	}
	return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
}

// stripCertVolumes removes the volumes of the given certificate secrets and
// their mounts from the deployment.
func stripCertVolumes(u *unstructured.Unstructured, secrets map[string]bool) error {
	volumes, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
	stripped := map[string]bool{}
	var kept []any
	for _, v := range volumes {
		m, _ := v.(map[string]any)
		secret, _, _ := unstructured.NestedString(m, "secret", "secretName")
		if secret != "" && secrets[u.GetNamespace()+"/"+secret] {
			name, _, _ := unstructured.NestedString(m, "name")
			stripped[name] = true
			continue
		}
		kept = append(kept, v)
	}
	if len(stripped) == 0 {
		return nil
	}
	if len(kept) == 0 {
		unstructured.RemoveNestedField(u.Object, "spec", "template", "spec", "volumes")
	} else if err := unstructured.SetNestedSlice(u.Object, kept, "spec", "template", "spec", "volumes"); err != nil {
		return err
	}
	for _, field := range []string{"initContainers", "containers"} {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
		for i, c := range containers {
			m, _ := c.(map[string]any)
			mounts, _, _ := unstructured.NestedSlice(m, "volumeMounts")
			var keptMounts []any
			for _, mount := range mounts {
				name, _, _ := unstructured.NestedString(mount.(map[string]any), "name")
				if !stripped[name] {
					keptMounts = append(keptMounts, mount)
				}
			}
			if len(keptMounts) == 0 {
				delete(m, "volumeMounts")
			} else {
				m["volumeMounts"] = keptMounts
			}
			containers[i] = m
		}
		if len(containers) > 0 {
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", field); err != nil {
				return err
			}
		}
	}
	return nil
}

// grant is a binding of a role to a manager service account.
type grant struct {
	serviceAccount string // name only: OLM creates it in the install namespace
	roleKind       string
	roleName       string
	namespaced     bool // a RoleBinding: the rules hold in the install namespace only
	namespace      string
}

// permissions folds the roles bound to the manager service accounts into
// the CSV: RoleBindings into permissions, ClusterRoleBindings into
// clusterPermissions, one entry per service account with the roles' rules
// in the order of the roles' names.
func (g *generator) permissions() (permissions, clusterPermissions []v1alpha1.StrategyDeploymentPermissions, err error) {
	var grants []grant
	roles := map[string]*unstructured.Unstructured{}
	boundElsewhere := map[string]bool{}
	for _, u := range g.objs {
		switch u.GetKind() {
		case "Role", "ClusterRole":
			roles[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
		case "RoleBinding", "ClusterRoleBinding":
			b := &rbacv1.RoleBinding{} // a ClusterRoleBinding decodes into the same fields
			if err := fromUnstructured(u, b); err != nil {
				return nil, nil, err
			}
			var managers, others int
			var sa string
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && g.serviceAccounts[s.Namespace+"/"+s.Name] {
					managers++
					sa = s.Name
				} else {
					others++
				}
			}
			switch {
			case managers == 0:
				// Bound to someone else: the binding is a manifest of its own,
				// and so must be the role it binds.
				ns := ""
				if b.RoleRef.Kind == "Role" {
					ns = u.GetNamespace()
				}
				boundElsewhere[b.RoleRef.Kind+"/"+ns+"/"+b.RoleRef.Name] = true
				continue
			case managers > 1 || others > 0:
				return nil, nil, fmt.Errorf("%s: a binding of a manager service account must have it as its only subject", objectKey(u))
			}
			if u.GetKind() == "RoleBinding" && !g.serviceAccounts[u.GetNamespace()+"/"+sa] {
				return nil, nil, fmt.Errorf("%s: OLM grants CSV permissions in the install namespace only, not in %s", objectKey(u), u.GetNamespace())
			}
			grants = append(grants, grant{serviceAccount: sa, roleKind: b.RoleRef.Kind, roleName: b.RoleRef.Name,
				namespaced: u.GetKind() == "RoleBinding", namespace: u.GetNamespace()})
			g.done[objectKey(u)] = true
			g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "OLM binds the CSV's permissions to the service account"})
		}
	}
	sort.Slice(grants, func(i, j int) bool {
		a, b := grants[i], grants[j]
		return a.serviceAccount+"\x00"+a.roleKind+"\x00"+a.roleName < b.serviceAccount+"\x00"+b.roleKind+"\x00"+b.roleName
	})
	add := func(list []v1alpha1.StrategyDeploymentPermissions, sa string, rules []rbacv1.PolicyRule) []v1alpha1.StrategyDeploymentPermissions {
		for i := range list {
			if list[i].ServiceAccountName == sa {
				list[i].Rules = append(list[i].Rules, rules...)
				return list
			}
		}
		return append(list, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rules})
	}
	for _, gr := range grants {
		ns := ""
		if gr.roleKind == "Role" {
			ns = gr.namespace
		}
		u, ok := roles[gr.roleKind+"/"+ns+"/"+gr.roleName]
		if !ok {
			return nil, nil, fmt.Errorf("%s %s bound to service account %s is not in %s: OLM can only grant rules the CSV lists", gr.roleKind, gr.roleName, gr.serviceAccount, ManifestsSource)
		}
		r := &rbacv1.ClusterRole{}
		if err := fromUnstructured(u, r); err != nil {
			return nil, nil, err
		}
		if r.AggregationRule != nil {
			return nil, nil, fmt.Errorf("%s: an aggregated role cannot become CSV permissions", objectKey(u))
		}
		if gr.namespaced {
			permissions = add(permissions, gr.serviceAccount, r.Rules)
		} else {
			clusterPermissions = add(clusterPermissions, gr.serviceAccount, r.Rules)
		}
		if !g.done[objectKey(u)] && !boundElsewhere[gr.roleKind+"/"+ns+"/"+gr.roleName] {
			g.done[objectKey(u)] = true
			where := "CSV clusterPermissions"
			if gr.namespaced {
				where = "CSV permissions"
			}
			g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), where})
		}
	}
	for _, u := range g.objs {
		if (u.GetKind() == "ServiceAccount") && g.serviceAccounts[u.GetNamespace()+"/"+u.GetName()] {
			g.done[objectKey(u)] = true
			g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "OLM creates the service account the CSV's deployment names"})
		}
	}
	return permissions, clusterPermissions, nil
}

// webhooks turns the webhook configurations into webhookdefinitions. OLM
// creates a service for each webhook's deployment, serves it the
// certificate and fills in the caBundle, so the webhook services and the
// certificates are left out.
func (g *generator) webhooks() ([]v1alpha1.WebhookDescription, error) {
	services := map[string]*unstructured.Unstructured{}
	for _, u := range g.objs {
		if u.GetKind() == "Service" {
			services[u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	var defs []v1alpha1.WebhookDescription
	for _, u := range g.objs {
		var hooks []admissionregistrationv1.MutatingWebhook
		var typ v1alpha1.WebhookAdmissionType
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := fromUnstructured(u, c); err != nil {
				return nil, err
			}
			for _, w := range c.Webhooks {
				hooks = append(hooks, admissionregistrationv1.MutatingWebhook{
					Name: w.Name, ClientConfig: w.ClientConfig, Rules: w.Rules, FailurePolicy: w.FailurePolicy,
					MatchPolicy: w.MatchPolicy, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector,
					SideEffects: w.SideEffects, TimeoutSeconds: w.TimeoutSeconds,
					AdmissionReviewVersions: w.AdmissionReviewVersions, MatchConditions: w.MatchConditions,
				})
			}
			typ = v1alpha1.ValidatingAdmissionWebhook
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := fromUnstructured(u, c); err != nil {
				return nil, err
			}
			hooks = c.Webhooks
			typ = v1alpha1.MutatingAdmissionWebhook
		default:
			continue
		}
		g.done[objectKey(u)] = true
		g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "CSV webhookdefinitions"})
		for _, w := range hooks {
			d, svc, err := g.webhook(w, typ, services)
			if err != nil {
				return nil, fmt.Errorf("%s: webhook %s: %w", objectKey(u), w.Name, err)
			}
			defs = append(defs, d)
			if !g.done[objectKey(svc)] {
				g.done[objectKey(svc)] = true
				g.bundle.LeftOut = append(g.bundle.LeftOut, Note{objectKey(svc), "OLM creates the service of the webhookdefinitions"})
			}
		}
	}
	sort.Slice(defs, func(i, j int) bool {
		if defs[i].Type != defs[j].Type {
			return defs[i].Type < defs[j].Type
		}
		return defs[i].GenerateName < defs[j].GenerateName
	})
	return defs, nil
}

func (g *generator) webhook(w admissionregistrationv1.MutatingWebhook, typ v1alpha1.WebhookAdmissionType, services map[string]*unstructured.Unstructured) (v1alpha1.WebhookDescription, *unstructured.Unstructured, error) {
	var d v1alpha1.WebhookDescription
	ref := w.ClientConfig.Service
	switch {
	case ref == nil:
		return d, nil, errors.New("only service webhooks can be served by OLM, not a URL")
	case w.NamespaceSelector != nil && (len(w.NamespaceSelector.MatchLabels) > 0 || len(w.NamespaceSelector.MatchExpressions) > 0):
		return d, nil, errors.New("OLM sets the namespaceSelector from the OperatorGroup: leave it out")
	case len(w.MatchConditions) > 0:
		return d, nil, errors.New("webhookdefinitions cannot carry matchConditions")
	}
	svcObj, ok := services[ref.Namespace+"/"+ref.Name]
	if !ok {
		return d, nil, fmt.Errorf("service %s/%s is not in %s", ref.Namespace, ref.Name, ManifestsSource)
	}
	svc := &corev1.Service{}
	if err := fromUnstructured(svcObj, svc); err != nil {
		return d, nil, err
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	var target *intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			t := p.TargetPort
			if t.Type == intstr.Int && t.IntVal == 0 {
				t = intstr.FromInt32(p.Port)
			}
			target = &t
		}
	}
	if target == nil {
		return d, nil, fmt.Errorf("service %s/%s has no port %d", ref.Namespace, ref.Name, port)
	}
	var deployment string
	for _, u := range g.deployments {
		podLabels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			if deployment != "" {
				return d, nil, fmt.Errorf("service %s/%s selects the pods of more than one deployment", ref.Namespace, ref.Name)
			}
			deployment = u.GetName()
		}
	}
	if deployment == "" {
		return d, nil, fmt.Errorf("service %s/%s selects the pods of no deployment", ref.Namespace, ref.Name)
	}
	d = v1alpha1.WebhookDescription{
		GenerateName:            w.Name,
		Type:                    typ,
		DeploymentName:          deployment,
		ContainerPort:           port,
		TargetPort:              target,
		Rules:                   w.Rules,
		FailurePolicy:           w.FailurePolicy,
		MatchPolicy:             w.MatchPolicy,
		ObjectSelector:          w.ObjectSelector,
		SideEffects:             w.SideEffects,
		TimeoutSeconds:          w.TimeoutSeconds,
		AdmissionReviewVersions: w.AdmissionReviewVersions,
		WebhookPath:             ref.Path,
	}
	if typ == v1alpha1.MutatingAdmissionWebhook {
		d.ReinvocationPolicy = w.ReinvocationPolicy
	}
	return d, svcObj, nil
}

// rest places every object not placed yet: a manifest of its own when a
// bundle can carry its kind, left out with a reason when OLM provides it or
// cannot carry it, and an error otherwise, so that a new kind in
// config/manifests is a decision, not a surprise.
func (g *generator) rest() error {
	for _, u := range g.objs {
		key := objectKey(u)
		if g.done[key] {
			continue
		}
		gk := u.GroupVersionKind().Group + "/" + u.GetKind()
		if reason, ok := leftOutKinds[gk]; ok {
			g.bundle.LeftOut = append(g.bundle.LeftOut, Note{key, reason})
			continue
		}
		namespaced, ok := bundleKinds[u.GetKind()]
		if !ok {
			return fmt.Errorf("%s: a bundle cannot carry kind %s; remove it from %s or list it in leftOutKinds with the reason", key, gk, ManifestsSource)
		}
		if err := g.addManifest(manifestFileName(u), withoutNamespace(u, namespaced)); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) addManifest(name string, u *unstructured.Unstructured) error {
	if _, dup := g.manifests[name]; dup {
		return fmt.Errorf("two objects render to bundle/manifests/%s", name)
	}
	data, err := renderYAML(u.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", objectKey(u), err)
	}
	g.manifests[name] = data
	g.done[objectKey(u)] = true
	return nil
}

// annotations are the bundle's metadata annotations, also the labels of
// the bundle image.
func (g *generator) annotations() map[string]string {
	a := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
		"operators.operatorframework.io.bundle.package.v1":   g.pkg,
		"operators.operatorframework.io.bundle.channels.v1":  strings.Join(g.opts.Channels, ","),
	}
	if g.opts.DefaultChannel != "" {
		a["operators.operatorframework.io.bundle.channel.default.v1"] = g.opts.DefaultChannel
	}
	return a
}

// manifestFileName is <name>_<group>_<version>_<kind>.yaml, the core group
// written as nothing: <name>_v1_service.yaml.
func manifestFileName(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	parts := []string{u.GetName()}
	if gvk.Group != "" {
		parts = append(parts, gvk.Group)
	}
	parts = append(parts, gvk.Version, strings.ToLower(gvk.Kind))
	return strings.Join(parts, "_") + ".yaml"
}

// withoutNamespace drops the namespace of a namespaced object: OLM creates
// it in the install namespace.
func withoutNamespace(u *unstructured.Unstructured, namespaced bool) *unstructured.Unstructured {
	if !namespaced || u.GetNamespace() == "" {
		return u
	}
	c := u.DeepCopy()
	c.SetNamespace("")
	return c
}

func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

func sortNotes(n []Note) {
	sort.Slice(n, func(i, j int) bool { return n[i].Object < n[j].Object })
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s: %w", objectKey(u), err)
	}
	return nil
}

// strictConvert decodes obj into into and refuses unknown fields, so that
// a misspelt field of the base CSV is an error rather than lost.
func strictConvert(obj map[string]any, into any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
