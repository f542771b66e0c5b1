package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// OperatorUser is the user the operator runs as when it runs with the
// permissions it ships with.
const OperatorUser = "cleanup-operator"

// OperatorConfig returns a client configuration for a user that holds only
// the ClusterRoles of config/rbac the operator's service account is bound
// to (manager-role and manager-extra-resources), so that what runs with it
// proves those permissions are enough.
func (e *Env) OperatorConfig(ctx context.Context) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	for _, file := range []string{"role.yaml", "extra_resources_role.yaml"} {
		roles, err := clusterRoles(filepath.Join(RepoRoot(), "config", "rbac", file))
		if err != nil {
			return nil, err
		}
		for _, role := range roles {
			// A second call in the same environment finds them in place.
			if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: OperatorUser}},
			}
			binding.Name = role.Name + "-" + OperatorUser
			if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("binding ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	user, err := e.AddUser(envtest.User{Name: OperatorUser}, nil)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// clusterRoles reads the ClusterRoles of a multi-document YAML file.
func clusterRoles(file string) ([]rbacv1.ClusterRole, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []rbacv1.ClusterRole
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			if errors.Is(err, io.EOF) {
				return roles, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if role.Kind == "ClusterRole" {
			roles = append(roles, role)
		}
	}
}
