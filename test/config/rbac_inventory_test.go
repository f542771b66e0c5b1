package config_test

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

var updateInventory = flag.Bool("update", false, "rewrite testdata/rbac-inventory.txt from config/default")

// inventoryFile lists every right config/default grants the operator's
// service account, one line each: a widening fails this test until the
// file changes with it, so it is a reviewed change.
const inventoryFile = "testdata/rbac-inventory.txt"

// TestRBACInventory compares the rights config/default binds to the
// operator's service account, as (role, scope, verb, group/resource,
// names) lines, with the checked-in inventory.
func TestRBACInventory(t *testing.T) {
	got := strings.Join(inventory(t), "\n") + "\n"
	if *updateInventory {
		if err := os.WriteFile(inventoryFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(inventoryFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("the operator's rights differ from %s (review the change, then go test ./test/config -run TestRBACInventory -update):\n%s",
			inventoryFile, lineDiff(string(want), got))
	}
}

// inventory lists the rights of every Role and ClusterRole bound to the
// operator's service account.
func inventory(t *testing.T) []string {
	t.Helper()
	m := build(t, "default")
	const sa = "cleanup-operator-controller-manager"
	bound := map[string]string{} // role kind/name -> scope
	isOperator := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa })
	}
	for _, b := range decode[rbacv1.ClusterRoleBinding](t, m, "ClusterRoleBinding") {
		if isOperator(b.Subjects) {
			bound["ClusterRole/"+b.RoleRef.Name] = "cluster"
		}
	}
	for _, b := range decode[rbacv1.RoleBinding](t, m, "RoleBinding") {
		if isOperator(b.Subjects) {
			bound[b.RoleRef.Kind+"/"+b.RoleRef.Name] = "namespace " + b.Namespace
		}
	}
	var lines []string
	add := func(kind, name string, rules []rbacv1.PolicyRule) {
		scope, ok := bound[kind+"/"+name]
		if !ok {
			return
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						names := "*"
						if len(r.ResourceNames) > 0 {
							names = strings.Join(r.ResourceNames, ",")
						}
						lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%s/%s\t%s", name, scope, v, g, res, names))
					}
				}
			}
		}
	}
	for _, r := range decode[rbacv1.ClusterRole](t, m, "ClusterRole") {
		add("ClusterRole", r.Name, r.Rules)
	}
	for _, r := range decode[rbacv1.Role](t, m, "Role") {
		add("Role", r.Name, r.Rules)
	}
	slices.Sort(lines)
	return slices.Compact(lines)
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
