// Package api holds the platform's HTTP contract, api/openapi.yaml, embedded so that
// both services serve the document they were built with (GET /openapi.yaml) and the
// component tests check against the same bytes (internal/apitest).
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// ContentType is the media type /openapi.yaml is served with (RFC 9512).
const ContentType = "application/yaml"
