// Package argocd runs the Argo CD customizations under config/argocd through
// Argo CD's own code: argocd-cm.yaml is read by Argo CD's settings manager,
// and each case of each health_test.yaml is evaluated on the path Argo CD's
// application controller takes to a resource's health, with the Lua
// libraries Argo CD opens for a custom health check and no others.
package argocd
