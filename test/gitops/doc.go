// Package gitops tests what GitOps tools see of the operator: the samples and
// documented policies through server-side dry run, kstatus on policies the
// operator reconciled, and the Argo CD health check and Application under
// config/argocd.
package gitops
