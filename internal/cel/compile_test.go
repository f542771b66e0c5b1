package cel_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

var (
	loadedCRDs []apiextensionsv1.CustomResourceDefinition
	envOnce    sync.Once
	testEnv    *cel.Env
	envErr     error
)

// typedEnv is the environment typed by the real OCM and policy CRDs.
func typedEnv(t testing.TB) *cel.Env {
	t.Helper()
	envOnce.Do(func() {
		crds, err := testenv.LoadCRDs()
		if err != nil {
			envErr = err
			return
		}
		loadedCRDs = crds
		schemas, err := cel.SchemasFromCRDs(crds)
		if err != nil {
			envErr = err
			return
		}
		if schemas.ManagedCluster == nil || schemas.ManifestWork == nil || schemas.ConfigurationPolicy == nil {
			envErr = errNoSchemas
			return
		}
		testEnv, envErr = cel.NewEnv(schemas)
	})
	switch {
	case errors.Is(envErr, testenv.ErrNoCRDs):
		// make test builds them first; a bare go test may run without.
		t.Skipf("these tests type their expressions by the real OCM and policy CRDs: %v", envErr)
	case envErr != nil:
		t.Fatal(envErr)
	}
	return testEnv
}

func mustCRDs(t testing.TB) []apiextensionsv1.CustomResourceDefinition {
	typedEnv(t)
	return loadedCRDs
}

type stringErr string

func (e stringErr) Error() string { return string(e) }

const errNoSchemas = stringErr("the ManagedCluster, ManifestWork and ConfigurationPolicy CRDs must all be present")

// policy returns a valid policy, changed by edit.
func policy(edit func(s *v1alpha1.CleanupPolicySpec)) *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		},
	}
	if edit != nil {
		edit(&p.Spec)
	}
	return p
}

// examplePolicy is the policy of the API contract's example, every field set.
func examplePolicy() *v1alpha1.CleanupPolicy {
	return policy(func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod'"
		s.Priority = 100
		s.Variables = []v1alpha1.Variable{{Name: "tier", Expression: "cluster.metadata.labels[?'tier'].orValue('standard')"}}
		s.RemoveStrategy = v1alpha1.RemoveStrategy{
			Default: v1alpha1.RemoveStrategyRequired,
			Rules:   []v1alpha1.StrategyRule{{When: "variables.tier == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}},
			Timeout: &metav1.Duration{Duration: 30 * time.Minute},
		}
		s.MonitoredResources = []v1alpha1.MonitoredResource{
			{GroupVersionResource: v1alpha1.GroupVersionResource{Group: "hive.openshift.io", Version: "v1", Resource: "clusterdeployments"}},
			{GroupVersionResource: v1alpha1.GroupVersionResource{Group: "apps.open-cluster-management.io", Version: "v1", Resource: "subscriptions"},
				When: "object.metadata.labels[?'app'].hasValue()"},
		}
		s.DeletionStages = []v1alpha1.DeletionStage{
			{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}},
			{Name: "workloads", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
				When: "!object.metadata.name.endsWith('-klusterlet')"},
			{Name: "klusterlet", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}},
		}
		s.KeepNamespace = "namespace.metadata.labels[?'cluster.open-cluster-management.io/keep-upon-cluster-deletion'].orValue('') == 'true'"
		s.DeletionSignal = &v1alpha1.DeletionSignal{WorkName: "cleanup-signal", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}}
		s.Orphaning = []v1alpha1.OrphaningRule{
			{Name: "keep-crds", When: "manifest.kind == 'CustomResourceDefinition'"},
			{Name: "keep-legacy", When: "work.metadata.labels[?'legacy'].orValue('') == 'true'"},
		}
		s.Prune = &v1alpha1.Prune{Default: v1alpha1.PruneNone, Rules: []v1alpha1.PruneRule{
			{When: "policy.metadata.labels[?'cleanup'].orValue('') == 'strict'", Behavior: v1alpha1.PruneDeleteAll},
			{When: "policy.spec.remediationAction.lowerAscii() == 'enforce'", Behavior: v1alpha1.PruneDeleteIfCreated},
		}}
	})
}

func TestCompileExample(t *testing.T) {
	compiled, errs := cel.Compile(typedEnv(t), examplePolicy())
	if len(errs) > 0 {
		t.Fatalf("the contract's example must compile: %v", errs.ToAggregate())
	}
	if compiled.ClusterSelector == nil || len(compiled.StageWhen) != 3 || compiled.StageWhen[2] != nil || compiled.KeepNamespace == nil {
		t.Fatalf("compiled policy is missing expressions: %+v", compiled)
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(s *v1alpha1.CleanupPolicySpec)
		// every substring must appear in one error, which names the field.
		field string
		want  []string
	}{
		{
			name:  "does not parse",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.metadata.labels[" },
			field: "spec.clusterSelector",
			want:  []string{"compilation failed", "Syntax error"},
		},
		{
			name: "unbound variable in orphaning",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "a", When: "true"}, {Name: "b", When: "manfest.kind == 'ConfigMap'"}}
			},
			field: "spec.orphaning[1].when",
			want:  []string{"undeclared reference to 'manfest'"},
		},
		{
			name:  "variable of another field",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "work.metadata.name == 'x'" },
			field: "spec.clusterSelector",
			want:  []string{"undeclared reference to 'work'"},
		},
		{
			name: "variables are not bound in the selector",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "a", Expression: "true"}}
				s.ClusterSelector = "variables.a"
			},
			field: "spec.clusterSelector",
			want:  []string{"undeclared reference to 'variables'"},
		},
		{
			name:  "namespace is not bound in selectors",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "namespace.metadata.name == 'x'" },
			field: "spec.clusterSelector",
			want:  []string{"undeclared reference to 'namespace'"},
		},
		{
			name: "a manifest's conditions in the work's status are not cached",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "a", When: "work.status.resourceStatus.manifests.exists(m, m.conditions.size() > 0)"}}
			},
			field: "spec.orphaning[0].when",
			want:  []string{"undefined field 'conditions'"},
		},
		{
			name: "a manifest's status feedback in the work's status is not cached",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "a", When: "has(work.status.resourceStatus.manifests[0].statusFeedback)"}}
			},
			field: "spec.orphaning[0].when",
			want:  []string{"undefined field 'statusFeedback'"},
		},
		{
			name:  "misspelled field of ManagedCluster",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.metadata.lables['env'] == 'prod'" },
			field: "spec.clusterSelector",
			want:  []string{"undefined field 'lables'"},
		},
		{
			name:  "misspelled spec field of ManagedCluster",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.spec.hubAcceptsClients" },
			field: "spec.clusterSelector",
			want:  []string{"undefined field 'hubAcceptsClients'"},
		},
		{
			name: "misspelled field of ConfigurationPolicy",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{When: "policy.spec.remediation == 'enforce'", Behavior: v1alpha1.PruneDeleteAll}}}
			},
			field: "spec.prune.rules[0].when",
			want:  []string{"undefined field 'remediation'"},
		},
		{
			name: "stage filter reads only metadata",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "a", GroupVersionResource: gvr("manifestworks"), When: "object.spec.workload != null"}}
			},
			field: "spec.deletionStages[0].when",
			want:  []string{"undefined field 'spec'"},
		},
		{
			// The estimate cannot bound the elements of a list no schema
			// describes: refused for its cost, as the API server does.
			name: "joining a computed list",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "flat", Expression: "cluster.metadata.name.split('-').join('')"}}
			},
			field: "spec.variables[0].expression",
			want:  []string{"estimated cost", "exceeds the limit"},
		},
		{
			name:  "wrong result type",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.metadata.name" },
			field: "spec.clusterSelector",
			want:  []string{"must evaluate to bool, but evaluates to string"},
		},
		{
			name: "wrong result type through a variable",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "n", Expression: "size(cluster.metadata.labels)"}}
				s.KeepNamespace = "variables.n"
			},
			field: "spec.keepNamespace",
			want:  []string{"must evaluate to bool, but evaluates to int"},
		},
		{
			name:  "deletion protection that does not compile",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.DeletionProtection = "clustr.metadata.name == 'a'" },
			field: "spec.deletionProtection",
			want:  []string{"undeclared reference to 'clustr'"},
		},
		{
			name:  "deletion protection that is not bool",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.DeletionProtection = "cluster.metadata.name" },
			field: "spec.deletionProtection",
			want:  []string{"must evaluate to bool, but evaluates to string"},
		},
		{
			name:  "deletion protection reads no namespace",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.DeletionProtection = "namespace.metadata.name == 'a'" },
			field: "spec.deletionProtection",
			want:  []string{"undeclared reference to 'namespace'"},
		},
		{
			name: "variable used before it is declared",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{
					{Name: "a", Expression: "variables.b + 'x'"},
					{Name: "b", Expression: "'b'"},
				}
			},
			field: "spec.variables[0].expression",
			want:  []string{"undefined field 'b'"},
		},
		{
			name: "variable of the wrong type in a later expression",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "tier", Expression: "'gold'"}}
				s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "variables.tier > 3", Strategy: v1alpha1.RemoveStrategyNeedless}}
			},
			field: "spec.removeStrategy.rules[0].when",
			want:  []string{"no matching overload"},
		},
		{
			name: "cost bound exceeded",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.ClusterSelector = "cluster.metadata.labels.all(a, cluster.metadata.labels.all(b, cluster.metadata.labels.all(c, a + b + c != '')))"
			},
			field: "spec.clusterSelector",
			want:  []string{"estimated cost", "exceeds the limit"},
		},
		{
			name: "duplicate variable names",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "a", Expression: "1"}, {Name: "a", Expression: "2"}}
			},
			field: "spec.variables[1].name",
			want:  []string{"Duplicate value"},
		},
		{
			name: "duplicate stage names",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{
					{Name: "works", GroupVersionResource: gvr("manifestworks")},
					{Name: "works", GroupVersionResource: gvr("manifestworks")},
				}
			},
			field: "spec.deletionStages[1].name",
			want:  []string{"Duplicate value"},
		},
		{
			name: "duplicate orphaning rule names",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: "true"}, {Name: "r", When: "false"}}
			},
			field: "spec.orphaning[1].name",
			want:  []string{"Duplicate value"},
		},
		{
			name:  "unknown strategy",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.RemoveStrategy.Default = "Sometimes" },
			field: "spec.removeStrategy.default",
			want:  []string{"Unsupported value", "Sometimes", "Required"},
		},
		{
			name:  "missing strategy",
			edit:  func(s *v1alpha1.CleanupPolicySpec) { s.RemoveStrategy.Default = "" },
			field: "spec.removeStrategy.default",
			want:  []string{"Unsupported value"},
		},
		{
			name: "unknown strategy in a rule",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "true", Strategy: "Gentle"}}
			},
			field: "spec.removeStrategy.rules[0].strategy",
			want:  []string{"Unsupported value", "Gentle"},
		},
		{
			name: "unknown prune behaviour",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Prune = &v1alpha1.Prune{Default: "DeleteSome"}
			},
			field: "spec.prune.default",
			want:  []string{"Unsupported value", "DeleteSome"},
		},
		{
			name: "stage with an empty resource name",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "a", GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1"}}}
			},
			field: "spec.deletionStages[0].resource",
			want:  []string{"Required value"},
		},
		{
			name: "monitored resource with an empty resource name",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.MonitoredResources = []v1alpha1.MonitoredResource{{GroupVersionResource: v1alpha1.GroupVersionResource{Group: "hive.openshift.io", Version: "v1"}}}
			},
			field: "spec.monitoredResources[0].resource",
			want:  []string{"Required value"},
		},
		{
			name: "rule with an empty expression",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r"}}
			},
			field: "spec.orphaning[0].when",
			want:  []string{"Required value"},
		},
		{
			name: "signal manifest without a name",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionSignal = &v1alpha1.DeletionSignal{Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}}}}
			},
			field: "spec.deletionSignal.manifests[0].metadata.name",
			want:  []string{"Required value"},
		},
		{
			name: "stage in other namespaces without a when",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "argocd", Namespaces: []string{"argocd"},
					GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}}}
			},
			field: "spec.deletionStages[0].when",
			want:  []string{"Required value", "would delete every object of the resource there"},
		},
		{
			name: "cluster-scoped stage without a when",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "roles", ClusterScoped: true,
					GroupVersionResource: v1alpha1.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}}}
			},
			field: "spec.deletionStages[0].when",
			want:  []string{"Required value"},
		},
		{
			name: "stage in every namespace",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "all", Namespaces: []string{"argocd", "*"}, When: "true",
					GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}}}
			},
			field: "spec.deletionStages[0].namespaces[1]",
			want:  []string{"name each namespace"},
		},
		{
			name: "stage both in namespaces and cluster-scoped",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.DeletionStages = []v1alpha1.DeletionStage{{Name: "both", Namespaces: []string{"argocd"}, ClusterScoped: true, When: "true",
					GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}}}
			},
			field: "spec.deletionStages[0].clusterScoped",
			want:  []string{"not both"},
		},
		{
			name: "non-positive timeout",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.RemoveStrategy.Timeout = &metav1.Duration{Duration: -time.Second}
			},
			field: "spec.removeStrategy.timeout",
			want:  []string{"must be positive"},
		},
	}
	env := typedEnv(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compiled, errs := cel.Compile(env, policy(tc.edit))
			if compiled != nil {
				t.Fatalf("Compile returned a policy with errors %v", errs)
			}
			for _, e := range errs {
				msg := e.Error()
				if !strings.HasPrefix(msg, tc.field+": ") {
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Fatalf("error on %s is %q, want it to contain %q", tc.field, msg, w)
					}
				}
				return
			}
			t.Fatalf("no error names %s; got %v", tc.field, errs.ToAggregate())
		})
	}
}

func TestCompileAcceptsWhatRunsAtRunTime(t *testing.T) {
	cases := map[string]func(s *v1alpha1.CleanupPolicySpec){
		"manifest is dynamic: any field of any kind": func(s *v1alpha1.CleanupPolicySpec) {
			s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: "manifest.spec.replicas > 2"}}
		},
		"prune rules may test for a missing cluster": func(s *v1alpha1.CleanupPolicySpec) {
			s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{When: "cluster == null || cluster.metadata.name == 'a'", Behavior: v1alpha1.PruneDeleteAll}}}
		},
		"typed fields deep in the ManagedCluster": func(s *v1alpha1.CleanupPolicySpec) {
			s.ClusterSelector = "cluster.spec.hubAcceptsClient && cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')"
		},
		"hyphenated ConfigurationPolicy fields are escaped": func(s *v1alpha1.CleanupPolicySpec) {
			s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{When: "size(policy.spec.object__dash__templates) > 0", Behavior: v1alpha1.PruneDeleteAll}}}
		},
		"an optional field with a default, then a string function": func(s *v1alpha1.CleanupPolicySpec) {
			s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{When: "policy.spec.?remediationAction.orValue('').lowerAscii() == 'enforce'", Behavior: v1alpha1.PruneDeleteAll}}}
		},
		"an optional list with a default, then a comprehension": func(s *v1alpha1.CleanupPolicySpec) {
			s.ClusterSelector = "cluster.status.?conditions.orValue([]).exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')"
		},
		"the work's conditions and each manifest's resource stay typed": func(s *v1alpha1.CleanupPolicySpec) {
			s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: "work.status.conditions.exists(c, c.type == 'Applied' && c.status == 'True') && " +
				"work.status.resourceStatus.manifests.exists(m, m.resourceMeta.resource == 'configmaps')"}}
		},
		"later variables read earlier ones": func(s *v1alpha1.CleanupPolicySpec) {
			s.Variables = []v1alpha1.Variable{{Name: "a", Expression: "'x'"}, {Name: "b", Expression: "variables.a + 'y'"}}
			s.KeepNamespace = "variables.b == 'xy' && namespace.metadata.name != ''"
		},
	}
	env := typedEnv(t)
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			if _, errs := cel.Compile(env, policy(edit)); len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
		})
	}
}

func TestUntypedEnvironmentChecksAtRunTimeOnly(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	if env.Typed(cel.VarCluster) {
		t.Fatal("cluster is typed without a schema")
	}
	// Without the CRD the field name cannot be checked, so it compiles...
	p := policy(func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.metadata.lables['env'] == 'prod'" })
	if _, errs := cel.Compile(env, p); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	// ...but an unbound variable is still refused.
	p = policy(func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "manifest.kind == 'x'" })
	if _, errs := cel.Compile(env, p); len(errs) == 0 {
		t.Fatal("an unbound variable compiled")
	}
}

func gvr(resource string) v1alpha1.GroupVersionResource {
	return v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: resource}
}
