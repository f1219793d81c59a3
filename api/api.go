// Package api holds the machine-readable contract of Spool's HTTP API: an
// OpenAPI 3.0.3 document that every server serves at GET /v1/openapi.json
// and that the SDKs are written against. docs/protocol.md describes the same
// API in prose for SDK authors; this package's tests fail when the two drift
// apart.
package api

import _ "embed"

// OpenAPI is the OpenAPI document of HTTP API v1 as JSON, byte for byte the
// file api/openapi.json. It is shared, so callers must not modify it.
//
//go:embed openapi.json
var OpenAPI []byte
