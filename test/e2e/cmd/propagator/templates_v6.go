//go:build ocm_v1_0

package main

import templates "github.com/stolostron/go-template-utils/v6/pkg/templates"

// The hub-template library of the propagator ocm-v1.0.0.mod pins (v0.16.0).
type templateConfig = templates.Config

var newTemplateResolver = templates.NewResolverWithCaching
