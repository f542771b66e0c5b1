// Package admissionpolicy creates the ValidatingAdmissionPolicies the operator relies on, when they are absent.
package admissionpolicy
