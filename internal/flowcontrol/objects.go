package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Name is the name of both the FlowSchema and the PriorityLevelConfiguration,
// the name config/default gives them too.
const Name = "cleanup-operator-manager"

// The priority level's values; docs/operations/configuration.md explains them.
const (
	// NominalConcurrencyShares is the level's share of the server's
	// concurrency: on a server with the default limits (600 seats) and
	// the suggested levels (245 shares), 10 shares are about 23 seats.
	NominalConcurrencyShares = 10
	// LendablePercent of the level's seats other levels may borrow while
	// the operator is idle.
	LendablePercent = 50
	// BorrowingLimitPercent caps what the level borrows from idle levels:
	// at most its nominal seats again.
	BorrowingLimitPercent = 100
	// Queues, HandSize and QueueLengthLimit shape the queuing: 64 queues,
	// each flow (a namespace) shuffle-sharded onto 6 of them, 50 requests
	// a queue; beyond that the server answers 429 and the client retries.
	Queues           = 64
	HandSize         = 6
	QueueLengthLimit = 50
	// MatchingPrecedence puts the FlowSchema before the suggested
	// service-accounts schema (9000) and after the system ones (up to 900).
	MatchingPrecedence = 1000
)

// Objects returns the PriorityLevelConfiguration and the FlowSchema that
// routes every request of the service account namespace/serviceAccount to it.
func Objects(namespace, serviceAccount string) []client.Object {
	level := &flowcontrolv1.PriorityLevelConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "PriorityLevelConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](NominalConcurrencyShares),
				LendablePercent:          ptr.To[int32](LendablePercent),
				BorrowingLimitPercent:    ptr.To[int32](BorrowingLimitPercent),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{
						Queues: Queues, HandSize: HandSize, QueueLengthLimit: QueueLengthLimit,
					},
				},
			},
		},
	}
	schema := &flowcontrolv1.FlowSchema{
		TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "FlowSchema"},
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: Name},
			MatchingPrecedence:         MatchingPrecedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByNamespaceType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{
					Kind:           flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: namespace, Name: serviceAccount},
				}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs:        []string{flowcontrolv1.VerbAll},
					APIGroups:    []string{flowcontrolv1.APIGroupAll},
					Resources:    []string{flowcontrolv1.ResourceAll},
					ClusterScope: true,
					Namespaces:   []string{flowcontrolv1.NamespaceEvery},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
					Verbs:           []string{flowcontrolv1.VerbAll},
					NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
				}},
			}},
		},
	}
	return []client.Object{level, schema}
}
