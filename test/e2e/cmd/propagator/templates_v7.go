//go:build !ocm_v1_0

package main

import templates "github.com/stolostron/go-template-utils/v7/pkg/templates"

// The hub-template library of the propagator go.mod pins (v0.18.0); the
// build tag ocm_v1_0 (make test-e2e-ocm-1.0) picks v0.16.0's.
type templateConfig = templates.Config

var newTemplateResolver = templates.NewResolverWithCaching
