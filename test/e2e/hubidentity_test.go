package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openshift/library-go/pkg/assets"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"open-cluster-management.io/ocm/manifests"
)

// The registration hub's identity on a hub OCM's cluster-manager operator
// installs: the service account registration-controller-sa in the
// ClusterManager's namespace. An admission policy sees this user, with these
// groups, when OCM's registration controllers (its gc among them) write.
const (
	clusterManagerName      = "cluster-manager"
	clusterManagerNamespace = "open-cluster-management-hub"
	registrationHubUserName = "system:serviceaccount:" + clusterManagerNamespace + ":registration-controller-sa"
)

var registrationHubUser = envtest.User{
	Name: registrationHubUserName,
	Groups: []string{
		"system:serviceaccounts",
		"system:serviceaccounts:" + clusterManagerNamespace,
		"system:authenticated",
	},
}

// registrationHubConfig gives OCM's registration hub the ClusterRole and
// ClusterRoleBinding OCM ships for it, rendered from the OCM module the suite
// runs, and returns a client certificate config for its user. The binding's
// subject is the service account; RBAC matches it to the user name
// system:serviceaccount:<namespace>:<name>, which is the certificate's.
func registrationHubConfig() *rest.Config {
	GinkgoHelper()
	role, binding := registrationHubRBAC()
	Expect(k8s.Create(ctx, role)).To(Succeed())
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	u, err := env.AddUser(registrationHubUser, nil)
	Expect(err).NotTo(HaveOccurred())
	raw, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(logDir, "registration-hub.kubeconfig"), raw, 0o600)).To(Succeed())
	return u.Config()
}

// registrationHubRBAC renders the registration controller's ClusterRole and
// ClusterRoleBinding from OCM's embedded cluster-manager manifests, as the
// cluster-manager operator renders them for a ClusterManager named
// cluster-manager with no optional feature (cluster importer, cluster
// profiles, gRPC) enabled. The file's name differs between releases
// (cluster-manager/hub/registration/clusterrole.yaml in v1.2.0,
// cluster-manager/hub/cluster-manager-registration-clusterrole.yaml in
// v1.0.0), so it is found by what it holds.
func registrationHubRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	GinkgoHelper()
	config := manifests.HubConfig{
		ClusterManagerName:      clusterManagerName,
		ClusterManagerNamespace: clusterManagerNamespace,
	}
	const name = "open-cluster-management:" + clusterManagerName + "-registration:controller"
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	files := manifests.ClusterManagerManifestFiles
	Expect(fs.WalkDir(files, "cluster-manager/hub", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		raw, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		if !bytes.Contains(raw, []byte("{{ .ClusterManagerName }}-registration:controller")) {
			return nil
		}
		rendered := assets.MustCreateAssetFromTemplate(path, raw, config).Data
		var typed struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(rendered, &typed); err != nil {
			return err
		}
		switch typed.Kind {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal(rendered, r); err != nil {
				return err
			}
			if r.Name == name {
				role = r
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			if err := yaml.Unmarshal(rendered, b); err != nil {
				return err
			}
			if b.Name == name {
				binding = b
			}
		}
		return nil
	})).To(Succeed())
	Expect(role).NotTo(BeNil(), "no ClusterRole %s in OCM's cluster-manager manifests", name)
	Expect(binding).NotTo(BeNil(), "no ClusterRoleBinding %s in OCM's cluster-manager manifests", name)
	Expect(binding.RoleRef.Name).To(Equal(name))
	Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{
		Kind: rbacv1.ServiceAccountKind, Namespace: clusterManagerNamespace, Name: "registration-controller-sa",
	}))
	return role, binding
}
