// Package settings is what the operator's flags change of its decisions,
// as the operator publishes it in a ConfigMap of its namespace, so that
// the plugin's previews decide as the running operator does.
package settings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// ConfigMapName is the ConfigMap, in the operator's namespace, that holds
// the settings (key DataKey, JSON).
const (
	ConfigMapName = "cleanup-operator-settings"
	DataKey       = "settings.json"
)

// Retention of teardown records by default: ten ended records per cluster,
// none older than 90 days.
const (
	DefaultRecordsPerCluster = 10
	DefaultRecordMaxAge      = 90 * 24 * time.Hour
)

// Settings are the operator's flags that change a decision the plugin
// previews, by the flags' names.
type Settings struct {
	// OperatorNamespace (--operator-namespace) keeps the teardown records,
	// and a teardown never deletes it.
	OperatorNamespace string `json:"operatorNamespace"`
	// BlastRadius is the operator-wide budget (--blast-radius-max-teardowns,
	// --blast-radius-window, --max-concurrent-teardowns).
	BlastRadius v1alpha1.BlastRadius `json:"blastRadius"`
	// NamespaceDeny (--namespace-deny) are the patterns a teardown never
	// deletes, beyond decision.DefaultNamespaceDeny and OperatorNamespace.
	NamespaceDeny []string `json:"namespaceDeny,omitempty"`
	// DeleteConfirmationMaxAge (--delete-confirmation-max-age) is how long
	// a deletion confirmation counts.
	DeleteConfirmationMaxAge metav1.Duration `json:"deleteConfirmationMaxAge"`
	// TeardownRecordMaxAge (--teardown-record-max-age, 0: no bound) and
	// TeardownRecordsPerCluster (--teardown-records-per-cluster) bound the
	// records the blast radius counts.
	TeardownRecordMaxAge      metav1.Duration `json:"teardownRecordMaxAge"`
	TeardownRecordsPerCluster int             `json:"teardownRecordsPerCluster"`
	// SignalManifests (--signal-manifest-kinds, --signal-manifest-max-bytes,
	// --signal-manifests-max-total-bytes) bound the deletion-signal
	// manifests admission lets through.
	SignalManifests SignalManifests `json:"signalManifests"`
}

// SignalManifests are the limits of the deletion-signal manifests.
type SignalManifests struct {
	Kinds         []string `json:"kinds"`
	MaxBytes      int      `json:"maxBytes"`
	MaxTotalBytes int      `json:"maxTotalBytes"`
}

// Defaults are the settings of the operator's binary run without flags, in
// namespace.
func Defaults(namespace string) *Settings {
	l := admissionpolicy.DefaultSignalLimits()
	return &Settings{
		OperatorNamespace:         namespace,
		BlastRadius:               v1alpha1.BlastRadius{Window: &metav1.Duration{Duration: v1alpha1.DefaultBlastRadiusWindow.Duration}},
		DeleteConfirmationMaxAge:  metav1.Duration{Duration: decision.DefaultConfirmationMaxAge},
		TeardownRecordMaxAge:      metav1.Duration{Duration: DefaultRecordMaxAge},
		TeardownRecordsPerCluster: DefaultRecordsPerCluster,
		SignalManifests:           SignalManifests{Kinds: l.Kinds, MaxBytes: l.MaxBytes, MaxTotalBytes: l.MaxTotalBytes},
	}
}

// SignalLimits are the signal manifests' limits as admission checks them.
func (s *Settings) SignalLimits() admissionpolicy.SignalLimits {
	return admissionpolicy.SignalLimits{Kinds: s.SignalManifests.Kinds, MaxBytes: s.SignalManifests.MaxBytes,
		MaxTotalBytes: s.SignalManifests.MaxTotalBytes}
}

// NamespaceDenyList is the full list of namespaces a teardown never deletes.
func (s *Settings) NamespaceDenyList() []string {
	return decision.NamespaceDenyList(s.OperatorNamespace, s.NamespaceDeny)
}

// ConfigMap is the ConfigMap that publishes s.
func (s *Settings) ConfigMap() (*corev1.ConfigMap, error) {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		// No label of the operator's: it is not one of the marks
		// uninstall removes, and goes with the namespace.
		ObjectMeta: metav1.ObjectMeta{Namespace: s.OperatorNamespace, Name: ConfigMapName},
		Data:       map[string]string{DataKey: string(raw)},
	}, nil
}

// ErrNotPublished says the operator's namespace holds no settings.
var ErrNotPublished = errors.New("no settings published")

// Read reads the settings the operator published in namespace.
func Read(ctx context.Context, c client.Reader, namespace string) (*Settings, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ConfigMapName}, cm)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: ConfigMap %s/%s not found", ErrNotPublished, namespace, ConfigMapName)
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	s := &Settings{}
	if err := json.Unmarshal([]byte(cm.Data[DataKey]), s); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", namespace, ConfigMapName, DataKey, err)
	}
	if s.OperatorNamespace == "" {
		s.OperatorNamespace = namespace
	}
	return s, nil
}
