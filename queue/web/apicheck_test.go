package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/api"
)

// The API's answers in every test are validated against the served spec (apiSpec): their status
// must be one the operation documents, their body must match its schema.

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
	// exercised holds the operations the tests answered with 200, by operationId.
	exercised sync.Map
)

func apiRouter(t testing.TB) routers.Router {
	specOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		b, err := api.Spec()
		if err != nil {
			specErr = err
			return
		}
		doc, err := openapi3.NewLoader().LoadFromData(b)
		if err != nil {
			specErr = err
			return
		}
		doc.Servers = openapi3.Servers{{URL: "http://127.0.0.1/"}}
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	require.NoError(t, specErr)
	return specRouter
}

// apiResponse is an API answer, its JSON decoded into a map (and the raw body).
type apiResponse struct {
	response
	json map[string]any
}

// api sends a request to the API and validates the answer against the spec. body, if not
// empty, is sent as JSON; header holds pairs.
func (c *client) api(method, path, body string, header ...string) apiResponse {
	c.f.t.Helper()
	t := c.f.t
	req, err := http.NewRequest(method, c.f.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.c.Do(req)
	require.NoError(t, err)
	r := read(t, resp)
	out := apiResponse{response: r}
	validateAPI(t, req, r)
	if strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal([]byte(r.body), &out.json), "%s %s: %s", method, path, r.body)
	}
	return out
}

// validateAPI checks one answer against the spec: a route of the spec answers a status it
// documents with a body of its schema; a path outside the spec answers a JSON error.
func validateAPI(t testing.TB, req *http.Request, r response) {
	t.Helper()
	require.NoError(t, checkAPI(t, req, r), "%s %s %d: %.2000s", req.Method, req.URL, r.code, r.body)
}

// checkAPI is validateAPI's check.
func checkAPI(t testing.TB, req *http.Request, r response) error {
	probe := req.Clone(context.Background())
	probe.URL.Scheme, probe.URL.Host, probe.Host = "http", "127.0.0.1", "127.0.0.1"
	route, params, err := apiRouter(t).FindRoute(probe)
	if err != nil {
		var e api.Error
		if r.code != http.StatusNotFound && r.code != http.StatusMethodNotAllowed && r.code != http.StatusBadRequest {
			return fmt.Errorf("%s %s: not in the spec, answered %d", req.Method, req.URL, r.code)
		}
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Code == "" {
			return fmt.Errorf("not a JSON error: %s", r.body)
		}
		return nil
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: r.code, Header: r.header, Body: io.NopCloser(bytes.NewReader([]byte(r.body))),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	if r.code == http.StatusOK || r.code == http.StatusAccepted {
		exercised.Store(route.Operation.OperationID, true)
	}
	return nil
}

// TestAPIValidatorRefusesWrongAnswers: the check every API test makes does refuse an answer
// that breaks the spec: a wrong type, a missing field, an undocumented status, a path outside it.
func TestAPIValidatorRefusesWrongAnswers(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest("GET", "http://127.0.0.1/api/v1/status", nil)
	require.NoError(t, err)
	json := http.Header{"Content-Type": {"application/json"}}
	require.NoError(t, checkAPI(t, req, response{200, json, `{"scopes":[]}`}))
	for _, bad := range []response{{200, json, `{"scopes":[{"corpus":1}]}`}, {200, json, `{}`}, {418, json, `{"code":"x","message":"y"}`}} {
		require.Error(t, checkAPI(t, req, bad), bad.body)
	}
	out, err := http.NewRequest("GET", "http://127.0.0.1/api/v1/nowhere", nil)
	require.NoError(t, err)
	require.Error(t, checkAPI(t, out, response{200, json, `{}`}))
}
