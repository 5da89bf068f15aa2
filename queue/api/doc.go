// Package api is the contract of cortexq's HTTP API (/api/v1, served by the dashboard,
// queue/web): the OpenAPI 3.1 document openapi.yaml, embedded and served as JSON, and the Go
// types of its answers. The dashboard's API handlers and the CLI's --json print these same
// types, built by the functions of this package from the same reads the dashboard's pages make
// (queue/inspect, queue/reports, queue/catalog), so the three surfaces cannot disagree
// (docs/api.md).
//
// The spec is written by hand; tests keep it and the code together: every route the dashboard
// registers under /api/v1 is a path of the spec and every path of the spec a route, and every
// answer of the API's tests validates against the spec (kin-openapi's openapi3filter).
package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var specYAML []byte

var (
	specOnce sync.Once
	specJSON []byte
	specDoc  document
	specErr  error
)

// document is the part of the spec the index and the docs page read.
type document struct {
	Info struct {
		Title, Version, Description string
	} `json:"info"`
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas    map[string]schema    `json:"schemas"`
		Parameters map[string]parameter `json:"parameters"`
		Responses  map[string]response  `json:"responses"`
	} `json:"components"`
}

type operation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Description string                `json:"description"`
	Parameters  []parameter           `json:"parameters"`
	Responses   map[string]response   `json:"responses"`
	Security    []map[string][]string `json:"security"`
}

type parameter struct {
	Ref         string `json:"$ref"`
	Name        string `json:"name"`
	In          string `json:"in"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

type response struct {
	Ref         string `json:"$ref"`
	Description string `json:"description"`
}

type schema struct {
	Description string            `json:"description"`
	Properties  map[string]schema `json:"properties"`
	Type        any               `json:"type"`
	Ref         string            `json:"$ref"`
	Items       *schema           `json:"items"`
	Required    []string          `json:"required"`
}

func load() {
	var v any
	if specErr = yaml.Unmarshal(specYAML, &v); specErr != nil {
		return
	}
	if specJSON, specErr = json.Marshal(v); specErr != nil {
		return
	}
	specErr = json.Unmarshal(specJSON, &specDoc)
}

// Spec is the OpenAPI 3.1 document as JSON (what /api/v1/openapi.json serves).
func Spec() ([]byte, error) {
	specOnce.Do(load)
	return specJSON, specErr
}

// Endpoints lists the spec's operations, by path then method: what GET /api/v1 lists.
func Endpoints() ([]Endpoint, error) {
	specOnce.Do(load)
	if specErr != nil {
		return nil, specErr
	}
	var out []Endpoint
	for path, ops := range specDoc.Paths {
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			e := Endpoint{Method: strings.ToUpper(method), Path: path, Operation: op.OperationID, Summary: op.Summary,
				Mutates: strings.ToUpper(method) != "GET"}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("api: the spec has no paths")
	}
	return out, nil
}

// Version is the spec's info.version.
func Version() string {
	specOnce.Do(load)
	return specDoc.Info.Version
}
