package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// OperatorUser is the user the operator runs as when it runs with the
// permissions it ships with.
const OperatorUser = "cleanup-operator"

// OperatorConfig returns a client configuration for a user that holds only
// the ClusterRoles of config/rbac the operator's service account is bound
// to (manager-role, manager-extra-resources and bootstrap-role), so that what runs with it
// proves those permissions are enough.
func (e *Env) OperatorConfig(ctx context.Context) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	for _, file := range []string{"role.yaml", "extra_resources_role.yaml", "bootstrap_role.yaml"} {
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
	if err := bindRecordRole(ctx, cs); err != nil {
		return nil, err
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

// CreateOperatorNamespace creates the operator's namespace, where it keeps
// its teardown records, as config/default does.
func CreateOperatorNamespace(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: record.DefaultNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the operator's namespace %s: %w", ns.Name, err)
	}
	return nil
}

// bindRecordRole creates the Role of config/rbac/teardown_record_role.yaml
// in the operator's namespace and binds it to the operator's user.
func bindRecordRole(ctx context.Context, cs kubernetes.Interface) error {
	f, err := os.Open(filepath.Join(RepoRoot(), "config", "rbac", "teardown_record_role.yaml"))
	if err != nil {
		return err
	}
	defer f.Close()
	role := &rbacv1.Role{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(role); err != nil {
		return err
	}
	role.Namespace = record.DefaultNamespace
	if _, err := cs.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Role %s: %w", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + OperatorUser, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: OperatorUser}},
	}
	if _, err := cs.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding Role %s: %w", role.Name, err)
	}
	return nil
}
