package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// run builds the CSV from the base CSV and the objects, and places every
// other object in the bundle or among the left out.
func (g *generator) run() (*v1alpha1.ClusterServiceVersion, error) {
	if err := g.read(); err != nil {
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

// read reads the base CSV, the CRDs and the deployments.
func (g *generator) read() error {
	if err := g.readBase(); err != nil {
		return err
	}
	if err := g.readCRDs(); err != nil {
		return err
	}
	return g.readDeployments()
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
