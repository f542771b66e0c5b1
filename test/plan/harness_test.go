package plan

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// world is what every seed runs on: one API server writing an audit log of
// the operator's writes, the operator running as its own user with the
// permissions it ships with, the test's work agent, and the plugin.
type world struct {
	dir    string
	env    *testenv.Env
	admin  client.Client
	audit  auditLog
	agent  *testenv.WorkAgent
	plugin string
	stop   func()
}

var shared struct {
	once sync.Once
	w    *world
	err  error
}

// setup starts the world once for the package's tests; TestMain stops it.
func setup(t *testing.T) *world {
	t.Helper()
	shared.once.Do(func() { shared.w, shared.err = start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.w
}

func TestMain(m *testing.M) {
	code := m.Run()
	if w := shared.w; w != nil {
		w.stop()
		if keep := os.Getenv("PLAN_KEEP"); keep != "" {
			if err := copyFiles(w.dir, keep); err != nil {
				fmt.Fprintln(os.Stderr, "keeping the logs:", err)
			}
		}
		_ = os.RemoveAll(w.dir)
	}
	os.Exit(code)
}

func start() (w *world, err error) {
	w = &world{}
	if w.dir, err = os.MkdirTemp("", "cleanup-plan-*"); err != nil {
		return nil, err
	}
	var stops []func()
	w.stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	defer func() {
		if err != nil {
			w.stop()
			_ = os.RemoveAll(w.dir)
		}
	}()
	// The plugin is built while the control plane starts.
	built := make(chan error, 1)
	go func() {
		var err error
		w.plugin, err = testenv.Build(w.dir, "kubectl-cleanup", "./cmd/kubectl-cleanup", "PLAN_PLUGIN")
		built <- err
	}()
	log, err := os.Create(filepath.Join(w.dir, "operator.log"))
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = log.Close() })
	logf.SetLogger(zap.New(zap.WriteTo(log), zap.UseDevMode(true)))

	w.audit = auditLog{path: filepath.Join(w.dir, "audit.log")}
	if w.env, err = testenv.StartWith(testenv.Options{AuditPolicy: auditPolicy(testenv.OperatorUser), AuditLog: w.audit.path}); err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = w.env.Stop() })
	if w.admin, err = client.New(w.env.Config, client.Options{Scheme: operator.NewScheme()}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stops = append(stops, cancel)
	cfg, err := w.env.OperatorConfig(ctx)
	if err != nil {
		return nil, err
	}
	if err := grantConfigMaps(ctx, w.admin); err != nil {
		return nil, err
	}
	op, err := w.env.StartOperator(ctx, cfg)
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = op.Stop() })
	w.agent = testenv.NewWorkAgent(w.admin)
	stops = append(stops, runAgent(ctx, w.agent))
	if err := <-built; err != nil {
		return nil, err
	}
	return w, nil
}

// grantConfigMaps grants the operator the ConfigMaps of every namespace:
// the fleet's policies monitor them and stage them for deletion, which the
// operator's own roles do not cover (it may read its own ConfigMaps only),
// so an administrator grants them as config/rbac/extra_resources_role.yaml
// says to.
func grantConfigMaps(ctx context.Context, admin client.Client) error {
	const name = "plan-configmaps"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "delete", "patch"}}}}
	if err := admin.Create(ctx, role); err != nil {
		return err
	}
	return admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testenv.OperatorUser}}})
}

// runAgent runs the work agent until the returned function stops it.
func runAgent(ctx context.Context, agent *testenv.WorkAgent) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		agent.Run(ctx, 100*time.Millisecond)
	}()
	return func() { cancel(); <-done }
}

// plan runs `kubectl cleanup plan CLUSTER -o json` as the administrator.
func (w *world) plan(ctx context.Context, cluster string) (*Plan, []byte, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, w.plugin, "--kubeconfig", w.env.Kubeconfig, "plan", cluster, "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("kubectl cleanup plan %s: %v\n%s%s", cluster, err, out.String(), errOut.String())
	}
	p, err := decodePlan(out.Bytes())
	return p, out.Bytes(), err
}

// until polls cond every interval until it holds, or fails at ctx's end.
func until(ctx context.Context, what string, interval time.Duration, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not by the deadline", what)
		case <-time.After(interval):
		}
	}
}

// quiet returns once the operator has made no write to the clusters for
// two polls in a row, counting from the audit log's mark.
func (w *world) quiet(ctx context.Context, mark int64, clusters []*cluster) error {
	count := func() (int, error) {
		events, err := w.audit.since(mark)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, c := range clusters {
			n += len(writesTo(events, testenv.OperatorUser, c.name))
		}
		return n, nil
	}
	last, calm := -1, 0
	return until(ctx, "the operator's writes to settle", 500*time.Millisecond, func() (bool, error) {
		n, err := count()
		if err != nil {
			return false, err
		}
		if n == last {
			calm++
		} else {
			last, calm = n, 0
		}
		return calm >= 2, nil
	})
}

// settled says whether the operator governs the cluster (its finalizer,
// and the signal work applied by the agent) and the agent applied every
// work's latest generation (its deleteOption stamp included).
func (w *world) settled(ctx context.Context, c *cluster) (bool, error) {
	mc := newManagedCluster(c.name)
	if err := w.admin.Get(ctx, client.ObjectKey{Name: c.name}, mc); err != nil {
		return false, err
	}
	if c.policy != nil && !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
		return false, nil
	}
	var list workv1.ManifestWorkList
	if err := w.admin.List(ctx, &list, client.InNamespace(c.name)); err != nil {
		return false, err
	}
	// In dry run no signal work is created.
	if c.policy != nil && c.policy.Spec.DeletionSignal != nil && !c.dryRun() {
		name := c.policy.Spec.DeletionSignal.WorkName
		if name == "" {
			name = "cleanup-signal"
		}
		if !slices.ContainsFunc(list.Items, func(w workv1.ManifestWork) bool { return w.Name == name }) {
			return false, nil
		}
	}
	for i := range list.Items {
		if appliedAt(&list.Items[i]) < list.Items[i].Generation {
			return false, nil
		}
	}
	return true, nil
}

func appliedAt(w *workv1.ManifestWork) int64 {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.Status == metav1.ConditionTrue {
		return c.ObservedGeneration
	}
	return -1
}

// contentDeleteReason is the reason of the cluster's ContentDeleteSuccess
// condition and its message; gone is true once the cluster is.
func (w *world) contentDeleteReason(ctx context.Context, name string) (reason, message string, gone bool, err error) {
	mc := newManagedCluster(name)
	if err := w.admin.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", true, nil
		}
		return "", "", false, err
	}
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		if m["type"] == v1alpha1.ContentDeleteSuccessCondition {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return reason, message, false, nil
}

func copyFiles(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}
