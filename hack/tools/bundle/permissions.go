package main

import (
	"fmt"
	"sort"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
	grants, roles, boundElsewhere, err := g.grants()
	if err != nil {
		return nil, nil, err
	}
	for _, gr := range grants {
		key := gr.roleKey()
		u, ok := roles[key]
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
			permissions = addRules(permissions, gr.serviceAccount, r.Rules)
		} else {
			clusterPermissions = addRules(clusterPermissions, gr.serviceAccount, r.Rules)
		}
		if !g.done[objectKey(u)] && !boundElsewhere[key] {
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

// roleKey names the role a grant binds: kind/namespace/name, the namespace
// empty for a ClusterRole.
func (gr grant) roleKey() string {
	return roleKey(gr.roleKind, gr.namespace, gr.roleName)
}

func roleKey(kind, bindingNamespace, name string) string {
	ns := ""
	if kind == "Role" {
		ns = bindingNamespace
	}
	return kind + "/" + ns + "/" + name
}

// grants reads the roles by roleKey and the bindings of the manager service
// accounts, sorted by service account, role kind and role name;
// boundElsewhere holds the roles bound to anyone else.
func (g *generator) grants() (grants []grant, roles map[string]*unstructured.Unstructured, boundElsewhere map[string]bool, err error) {
	roles = map[string]*unstructured.Unstructured{}
	boundElsewhere = map[string]bool{}
	for _, u := range g.objs {
		switch u.GetKind() {
		case "Role", "ClusterRole":
			roles[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
		case "RoleBinding", "ClusterRoleBinding":
			gr, ok, err := g.grantOf(u)
			if err != nil {
				return nil, nil, nil, err
			}
			if !ok {
				// Bound to someone else: the binding is a manifest of its own,
				// and so must be the role it binds.
				boundElsewhere[gr.roleKey()] = true
				continue
			}
			grants = append(grants, gr)
			g.done[objectKey(u)] = true
			g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "OLM binds the CSV's permissions to the service account"})
		}
	}
	sort.Slice(grants, func(i, j int) bool {
		a, b := grants[i], grants[j]
		return a.serviceAccount+"\x00"+a.roleKind+"\x00"+a.roleName < b.serviceAccount+"\x00"+b.roleKind+"\x00"+b.roleName
	})
	return grants, roles, boundElsewhere, nil
}

// grantOf reads a RoleBinding or ClusterRoleBinding. ok is false for a
// binding of no manager service account; the grant then only names the role.
func (g *generator) grantOf(u *unstructured.Unstructured) (gr grant, ok bool, err error) {
	b := &rbacv1.RoleBinding{} // a ClusterRoleBinding decodes into the same fields
	if err := fromUnstructured(u, b); err != nil {
		return grant{}, false, err
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
	gr = grant{serviceAccount: sa, roleKind: b.RoleRef.Kind, roleName: b.RoleRef.Name,
		namespaced: u.GetKind() == "RoleBinding", namespace: u.GetNamespace()}
	switch {
	case managers == 0:
		return gr, false, nil
	case managers > 1 || others > 0:
		return grant{}, false, fmt.Errorf("%s: a binding of a manager service account must have it as its only subject", objectKey(u))
	}
	if u.GetKind() == "RoleBinding" && !g.serviceAccounts[u.GetNamespace()+"/"+sa] {
		return grant{}, false, fmt.Errorf("%s: OLM grants CSV permissions in the install namespace only, not in %s", objectKey(u), u.GetNamespace())
	}
	return gr, true, nil
}

// addRules appends rules to the service account's entry, adding the entry
// if the list has none.
func addRules(list []v1alpha1.StrategyDeploymentPermissions, sa string, rules []rbacv1.PolicyRule) []v1alpha1.StrategyDeploymentPermissions {
	for i := range list {
		if list[i].ServiceAccountName == sa {
			list[i].Rules = append(list[i].Rules, rules...)
			return list
		}
	}
	return append(list, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rules})
}
