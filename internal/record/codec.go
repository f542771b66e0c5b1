package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Labels and annotations of a record's ConfigMap.
const (
	// RecordLabel marks a ConfigMap as a teardown record.
	RecordLabel = "cleanup.fleetops.dev/teardown-record"
	// ClusterLabel and ClusterUIDLabel name the cluster torn down.
	ClusterLabel    = "cleanup.fleetops.dev/cluster"
	ClusterUIDLabel = "cleanup.fleetops.dev/cluster-uid"
	// DryRunLabel marks the record of a dry run.
	DryRunLabel = "cleanup.fleetops.dev/dry-run"
	// FingerprintAnnotation is the fingerprint of a dry run's plan, so
	// that a record is written once per change of plan.
	FingerprintAnnotation = "cleanup.fleetops.dev/plan-fingerprint"
	// EndAnnotation is when the teardown ended (RFC 3339), for retention
	// to read without decoding the record.
	EndAnnotation = "cleanup.fleetops.dev/ended"
	// StartAnnotation is when the teardown's cluster was deleted (RFC
	// 3339) and PolicyAnnotation the policy that governs it, for the
	// blast radius to count teardowns begun without decoding the record.
	StartAnnotation  = "cleanup.fleetops.dev/started"
	PolicyAnnotation = "cleanup.fleetops.dev/policy"
	// NotBegunAnnotation marks the record of a teardown that has not
	// begun (Record.Begun): the blast radius does not count it.
	NotBegunAnnotation = "cleanup.fleetops.dev/not-begun"
)

// MetaAnnotations are the annotations of a record that its readers of
// metadata alone (the blast radius, the retention, a review's snapshot)
// read.
var MetaAnnotations = []string{StartAnnotation, PolicyAnnotation, EndAnnotation, NotBegunAnnotation}

// Keys of a record's ConfigMap: the record as JSON in data, or, above
// CompressAbove bytes, gzipped in binaryData.
const (
	JSONKey = "record.json"
	GzipKey = "record.json.gz"
)

const (
	// CompressAbove is the size of the JSON above which it is gzipped.
	CompressAbove = 32 << 10
	// MaxPayload bounds what a record stores: well under the 1 MiB the
	// API server accepts in a ConfigMap, leaving room for its metadata.
	MaxPayload = 900 << 10
	// MaxJSON bounds the JSON of a record Encode writes, however well
	// it compresses: the most compressible records reach 36 times
	// MaxPayload otherwise (TestDecodeBound).
	MaxJSON = 16 << 20
	// MaxDecoded bounds the JSON a record's gzip may decode to, twice
	// what Encode writes: a ConfigMap that decodes to more is refused
	// before it costs the manager more memory (its pod is limited to
	// 512 MiB).
	MaxDecoded = 2 * MaxJSON
)

// DefaultNamespace is the namespace config/default installs the operator in.
const DefaultNamespace = "cleanup-operator-system"

// Namespace is the operator's namespace: flag if set, else POD_NAMESPACE,
// else DefaultNamespace. The operator and the plugin find records alike.
func Namespace(flag string) string {
	if flag != "" {
		return flag
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// Name is the name of the record of a teardown: the cluster's name and
// the start of its UID, so that a cluster recreated under the same name
// gets a record of its own; -dryrun for a dry run's.
func Name(cluster string, uid types.UID, dryRun bool) string {
	short := strings.ReplaceAll(string(uid), "-", "")
	if len(short) > 8 {
		short = short[:8]
	}
	// A ConfigMap name is at most 253 characters.
	if len(cluster) > 200 {
		cluster = cluster[:200]
	}
	name := "teardown-" + strings.TrimSuffix(cluster, ".") + "-" + short
	if dryRun {
		name += "-dryrun"
	}
	return name
}

// Labels are the labels of a record's ConfigMap.
func Labels(r *Record) map[string]string {
	l := map[string]string{
		v1alpha1.ManagedByLabel: v1alpha1.ManagedBy,
		RecordLabel:             "true",
		ClusterLabel:            labelValue(r.Cluster),
		ClusterUIDLabel:         labelValue(string(r.UID)),
	}
	if r.DryRun {
		l[DryRunLabel] = "true"
	}
	return l
}

// labelValue bounds a value to the 63 characters a label value allows.
func labelValue(v string) string {
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-_.")
	}
	return v
}

// Encode writes the record into cm: data, labels and the end annotation.
// A record whose JSON exceeds CompressAbove is gzipped; one whose gzip
// still exceeds MaxPayload keeps as many of its first entries as fit and
// counts the rest (Summary).
func Encode(r *Record, cm *corev1.ConfigMap) error {
	cm.Name = r.Name
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range Labels(r) {
		cm.Labels[k] = v
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	delete(cm.Annotations, EndAnnotation)
	delete(cm.Annotations, NotBegunAnnotation)
	if !r.DryRun && !r.Begun() {
		cm.Annotations[NotBegunAnnotation] = "true"
	}
	cm.Annotations[StartAnnotation] = r.Start.UTC().Format(time.RFC3339)
	if r.Policy != "" {
		cm.Annotations[PolicyAnnotation] = r.Policy
	}
	if r.End != nil {
		cm.Annotations[EndAnnotation] = r.End.UTC().Format("2006-01-02T15:04:05Z")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cm.Data, cm.BinaryData = nil, nil
	if len(raw) <= CompressAbove {
		cm.Data = map[string]string{JSONKey: string(raw)}
		return nil
	}
	gz, err := gzipped(raw)
	if err != nil {
		return err
	}
	if len(gz) > MaxPayload || len(raw) > MaxJSON {
		if gz, err = summarised(r, max(float64(len(gz))/MaxPayload, float64(len(raw))/MaxJSON)); err != nil {
			return err
		}
	}
	cm.BinaryData = map[string][]byte{GzipKey: gz}
	return nil
}

// summarised is the gzip of the record with as many of its first entries
// as fit in MaxPayload, and in MaxJSON once decoded, the rest counted.
// over is how many times too large all of them are: the first guess keeps
// that share of the entries, and each guess that does not fit keeps a
// twentieth fewer.
func summarised(r *Record, over float64) ([]byte, error) {
	k := int(float64(len(r.Entries)) / over * 0.97)
	for {
		k = max(min(k, len(r.Entries)), 0)
		raw := mustJSON(cut(r, k))
		gz, err := gzipped(raw)
		if err != nil {
			return nil, err
		}
		if len(gz) <= MaxPayload && len(raw) <= MaxJSON {
			return gz, nil
		}
		if k == 0 {
			return nil, fmt.Errorf("the record of %s does not fit in a ConfigMap even without its entries", r.Cluster)
		}
		k = k * 19 / 20
	}
}

// cut is the record with its first n entries, the rest counted.
func cut(r *Record, n int) *Record {
	c := *r
	c.Entries = r.Entries[:n]
	s := &Summary{Entries: len(r.Entries), Kept: n, Omitted: map[string]int{}}
	if r.Summary != nil {
		s.Entries += r.Summary.Entries - r.Summary.Kept
		for k, v := range r.Summary.Omitted {
			s.Omitted[k] += v
		}
	}
	for _, e := range r.Entries[n:] {
		s.Omitted[e.Step+" "+string(e.Action)]++
	}
	c.Summary = s
	return &c
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // a Record always marshals
	}
	return raw
}

func gzipped(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads the record a ConfigMap holds.
func Decode(cm *corev1.ConfigMap) (*Record, error) {
	var raw []byte
	switch {
	case cm.BinaryData[GzipKey] != nil:
		zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[GzipKey]))
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, GzipKey, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, MaxDecoded+1)); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, GzipKey, err)
		}
		if len(raw) > MaxDecoded {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s decodes to more than %d MiB, more than a record the operator writes: it is not read",
				cm.Namespace, cm.Name, GzipKey, MaxDecoded>>20)
		}
	case cm.Data[JSONKey] != "":
		raw = []byte(cm.Data[JSONKey])
	default:
		return nil, fmt.Errorf("ConfigMap %s/%s holds no record (%s or %s)", cm.Namespace, cm.Name, JSONKey, GzipKey)
	}
	r := &Record{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	r.Name = cm.Name
	return r, nil
}

// IsRecord says whether the ConfigMap is a record the operator wrote.
func IsRecord(cm metav1.Object) bool {
	l := cm.GetLabels()
	return l[RecordLabel] == "true" && l[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
}

// Ended is when the record's teardown ended, from its annotation.
func Ended(cm metav1.Object) (metav1.Time, bool) {
	v := cm.GetAnnotations()[EndAnnotation]
	if v == "" {
		return metav1.Time{}, false
	}
	var t metav1.Time
	if err := t.UnmarshalQueryParameter(v); err != nil {
		return metav1.Time{}, false
	}
	return t, true
}

// Size is the size of the stored payload of a ConfigMap, for reports.
func Size(cm *corev1.ConfigMap) int {
	return len(cm.BinaryData[GzipKey]) + len(cm.Data[JSONKey])
}
