package record

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func entry(action Action, name string, uid types.UID, state State) Entry {
	return Entry{Step: "stage/manifestworks", Action: action, State: state, Resource: "manifestworks.work.open-cluster-management.io",
		Namespace: "c1", Name: name, UID: uid, Time: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// randomRecord has n entries whose names and UIDs compress badly.
func randomRecord(n int, seed uint64) *Record {
	rng := rand.New(rand.NewPCG(seed, 2))
	r := &Record{Name: "teardown-c1-12345678", Cluster: "c1", UID: "12345678-aaaa", Start: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	for i := range n {
		name := fmt.Sprintf("w-%016x-%016x", rng.Uint64(), rng.Uint64())
		uid := types.UID(fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()))
		e := entry(Deleted, name, uid, Done)
		e.Time = metav1.NewTime(r.Start.Add(time.Duration(rng.Int64N(3600)) * time.Second)) // stored to the second
		if i%7 == 0 {
			e.Action = Forced
		}
		r.Entries = append(r.Entries, e)
	}
	return r
}

func TestEncodeDecode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		entries    int
		compressed bool
	}{
		{"small: plain JSON in data", 3, false},
		{"large: gzip in binaryData", 5000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := randomRecord(tc.entries, 1)
			cm := &corev1.ConfigMap{}
			g.Expect(Encode(r, cm)).To(Succeed())
			g.Expect(cm.BinaryData != nil).To(Equal(tc.compressed))
			g.Expect(Size(cm)).To(BeNumerically("<=", MaxPayload))
			g.Expect(cm.Labels).To(HaveKeyWithValue(ClusterLabel, "c1"))
			got, err := Decode(cm)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Entries).To(HaveLen(tc.entries))
			g.Expect(mustJSON(got.Entries)).To(MatchJSON(mustJSON(r.Entries)))
			g.Expect(got.Summary).To(BeNil())
		})
	}
}

// A record that does not fit even compressed keeps its first entries and
// counts the rest, and says so.
func TestEncodeSummarises(t *testing.T) {
	g := NewWithT(t)
	r := randomRecord(40000, 2)
	cm := &corev1.ConfigMap{}
	g.Expect(Encode(r, cm)).To(Succeed())
	t.Logf("40,000 entries of random names: %d bytes stored", Size(cm))
	g.Expect(Size(cm)).To(BeNumerically("<=", MaxPayload))
	got, err := Decode(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Summary).NotTo(BeNil())
	s := got.Summary
	g.Expect(s.Entries).To(Equal(40000))
	g.Expect(s.Kept).To(Equal(len(got.Entries)))
	g.Expect(s.Kept).To(BeNumerically(">", 1000))
	omitted := 0
	for _, n := range s.Omitted {
		omitted += n
	}
	g.Expect(omitted).To(Equal(40000 - s.Kept))
	g.Expect(mustJSON(got.Entries)).To(MatchJSON(mustJSON(r.Entries[:s.Kept])))
	counts := got.Counts()
	g.Expect(counts[Deleted] + counts[Forced]).To(Equal(40000))
}

// TestDecodeBound: the most compressible record (every entry alike but
// its number; 400,000 of them decode to 32 MB from 894 KB without
// MaxJSON) is written within MaxJSON, and a gzip that decodes beyond
// MaxDecoded is refused, naming the ConfigMap and the bound.
func TestDecodeBound(t *testing.T) {
	g := NewWithT(t)
	r := &Record{Name: "teardown-c1-12345678", Cluster: "c1", UID: "12345678-aaaa"}
	for i := range 400000 {
		r.Entries = append(r.Entries, entry(Deleted, fmt.Sprintf("w-%08d", i), types.UID(fmt.Sprintf("uid-%08d", i)), Done))
	}
	cm := &corev1.ConfigMap{}
	g.Expect(Encode(r, cm)).To(Succeed())
	g.Expect(Size(cm)).To(BeNumerically("<=", MaxPayload))
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[GzipKey]))
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the most compressible record: %d bytes stored, %d bytes of JSON decoded (bound %d)", Size(cm), len(raw), MaxDecoded)
	g.Expect(len(raw)).To(BeNumerically("<=", MaxJSON))
	_, err = Decode(cm)
	g.Expect(err).NotTo(HaveOccurred())

	bomb, err := gzipped(bytes.Repeat([]byte(" "), MaxDecoded+1))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Decode(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "teardown-x"}, BinaryData: map[string][]byte{GzipKey: bomb}})
	g.Expect(err).To(MatchError(ContainSubstring("ConfigMap ops/teardown-x: record.json.gz decodes to more than 32 MiB")))
}

func TestDecodeRefuses(t *testing.T) {
	for name, cm := range map[string]*corev1.ConfigMap{
		"no record":    {Data: map[string]string{"x": "y"}},
		"bad gzip":     {BinaryData: map[string][]byte{GzipKey: []byte("not gzip")}},
		"bad JSON":     {Data: map[string]string{JSONKey: "{"}},
		"wrong schema": {Data: map[string]string{JSONKey: `{"entries": "no"}`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(cm)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestAddListsEachActionOnAnObjectOnce(t *testing.T) {
	g := NewWithT(t)
	r := &Record{}
	g.Expect(r.Add(entry(Deleted, "a", "u1", Intended), entry(Deleted, "b", "u2", Intended))).To(Equal(2))
	// The same delete intended again (a retried write), a force of the
	// same object, a work of the same name recreated (another UID).
	g.Expect(r.Add(entry(Deleted, "a", "u1", Intended), entry(Forced, "a", "u1", Intended), entry(Deleted, "a", "u3", Intended))).To(Equal(2))
	g.Expect(r.Entries).To(HaveLen(4))
	g.Expect(r.Intended()).To(Equal(4))

	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	g.Expect(r.Resolve(at, "resolved after a restart", func(e *Entry) bool { return e.UID == "u1" })).To(Equal(2))
	g.Expect(r.Entries[0].State).To(Equal(Done))
	g.Expect(r.Entries[0].Time.Time).To(Equal(at))
	g.Expect(r.Entries[0].Note).To(Equal("resolved after a restart"))
	g.Expect(r.Intended()).To(Equal(2))
	// Done stays done.
	g.Expect(r.Resolve(at.Add(time.Hour), "", func(*Entry) bool { return true })).To(Equal(2))
	g.Expect(r.Entries[0].Time.Time).To(Equal(at))
	g.Expect(r.Deletes()).To(HaveLen(3))
	r.Entries = append(r.Entries, entry(Deleted, "c", "u4", Intended))
	r.Abandon()
	g.Expect(r.Entries[4].State).To(Equal(NotDone))
	g.Expect(r.Entries[0].State).To(Equal(Done))
}

func TestHolds(t *testing.T) {
	g := NewWithT(t)
	r := &Record{}
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	g.Expect(r.SetHold("", t0)).To(BeFalse())
	g.Expect(r.SetHold("unserved", t0)).To(BeTrue())
	g.Expect(r.SetHold("unserved", t0.Add(time.Minute))).To(BeFalse())
	g.Expect(r.SetHold("not owned", t0.Add(2*time.Minute))).To(BeTrue())
	g.Expect(r.SetHold("", t0.Add(5*time.Minute))).To(BeTrue())
	g.Expect(r.Holds).To(HaveLen(2))
	g.Expect(r.Holds[0].Duration(t0.Add(time.Hour))).To(Equal(2 * time.Minute))
	g.Expect(r.Holds[1].Duration(t0.Add(time.Hour))).To(Equal(3 * time.Minute))
	g.Expect(r.OpenHold()).To(BeNil())
}

// A record that notes only holds before the first write is marked not
// begun, so the blast radius does not count it; its first destructive
// entry, its end or its being found begun clears the mark.
func TestNotBegun(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	r := &Record{Name: "teardown-c1-1", Cluster: "c1", UID: "1", Start: metav1.NewTime(t0), Entries: []Entry{}}
	r.SetHold("spec.removeStrategy: no such key", t0)
	cm := &corev1.ConfigMap{}
	g.Expect(Encode(r, cm)).To(Succeed())
	g.Expect(cm.Annotations).To(HaveKeyWithValue(NotBegunAnnotation, "true"))

	r.Add(entry(Labelled, "c1", "ns", Done))
	g.Expect(Encode(r, cm)).To(Succeed())
	g.Expect(cm.Annotations).To(HaveKey(NotBegunAnnotation), "a label alone begins nothing")

	r.Add(entry(Deleted, "w1", "w1", Intended))
	g.Expect(Encode(r, cm)).To(Succeed())
	g.Expect(cm.Annotations).NotTo(HaveKey(NotBegunAnnotation))

	for name, rec := range map[string]*Record{
		"ended":   {Name: "e", End: &metav1.Time{Time: t0}},
		"resumed": {Name: "r", Resumed: true},
	} {
		out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NotBegunAnnotation: "true"}}}
		g.Expect(Encode(rec, out)).To(Succeed())
		g.Expect(out.Annotations).NotTo(HaveKey(NotBegunAnnotation), name)
	}
	dry := &corev1.ConfigMap{}
	g.Expect(Encode(&Record{Name: "d", DryRun: true}, dry)).To(Succeed())
	g.Expect(dry.Annotations).NotTo(HaveKey(NotBegunAnnotation), "a dry run is told apart by its label")
}

func TestDecided(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	r := &Record{Start: metav1.NewTime(t0)}
	g.Expect(r.Decided("p", 1, t0)).To(BeTrue())
	g.Expect(r.Decisions).To(BeEmpty())
	g.Expect(r.Decided("p", 1, t0.Add(time.Minute))).To(BeFalse())
	g.Expect(r.Decided("p", 2, t0.Add(time.Hour))).To(BeTrue())
	g.Expect(r.Decisions).To(Equal([]Decision{{"p", 1, metav1.NewTime(t0)}, {"p", 2, metav1.NewTime(t0.Add(time.Hour))}}))
}

func TestName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Name("prod-eu", "1a2b3c4d-5e6f-0000-0000-000000000000", false)).To(Equal("teardown-prod-eu-1a2b3c4d"))
	g.Expect(Name("prod-eu", "1a2b3c4d-5e6f-0000-0000-000000000000", true)).To(Equal("teardown-prod-eu-1a2b3c4d-dryrun"))
}

func TestNamespace(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("POD_NAMESPACE", "")
	g.Expect(Namespace("")).To(Equal(DefaultNamespace))
	t.Setenv("POD_NAMESPACE", "ops")
	g.Expect(Namespace("")).To(Equal("ops"))
	g.Expect(Namespace("flagged")).To(Equal("flagged"))
}

// BenchmarkEncode5000 measures writing a 5,000-object record.
func BenchmarkEncode5000(b *testing.B) {
	r := randomRecord(5000, 3)
	for b.Loop() {
		if err := Encode(r, &corev1.ConfigMap{}); err != nil {
			b.Fatal(err)
		}
	}
}
