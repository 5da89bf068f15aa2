package api_test

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/api"
)

// TestSpecIsValidOpenAPI31 loads the served document with kin-openapi and validates it as an
// OpenAPI 3.1 document: its structure, its references and its schemas' examples and defaults.
func TestSpecIsValidOpenAPI31(t *testing.T) {
	b, err := api.Spec()
	require.NoError(t, err)
	doc, err := openapi3.NewLoader().LoadFromData(b)
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater(), "version %s", doc.OpenAPI)
	require.NoError(t, doc.Validate(context.Background()))
	ends, err := api.Endpoints()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ends), 25)
	ids := map[string]bool{}
	for _, e := range ends {
		require.NotEmpty(t, e.Operation, "%s %s", e.Method, e.Path)
		require.False(t, ids[e.Operation], "operationId %s twice", e.Operation)
		ids[e.Operation] = true
		require.NotEmpty(t, e.Summary, e.Operation)
	}
}

// TestSpecRejectsABrokenDocument: the validator the test above relies on does refuse a 3.1
// document with a dangling reference (so the test can fail).
func TestSpecRejectsABrokenDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(`{"openapi":"3.1.0","info":{"title":"x","version":"1"},
		"paths":{"/x":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{"a":{"type":"nope"}}}}}}}}}}}`))
	if err == nil {
		err = doc.Validate(context.Background())
	}
	require.Error(t, err)
}
