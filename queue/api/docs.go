package api

import (
	"fmt"
	"sort"
	"strings"
)

// Docs is the spec as the docs page (/api/v1/docs) shows it: its operations and schemas.
type Docs struct {
	Title, Version, Description string
	Operations                  []DocsOperation
	Schemas                     []DocsSchema
}

// DocsOperation is one operation of the docs page.
type DocsOperation struct {
	Method, Path, Summary string
	Secured               bool
	Params                []DocsField
	Responses             []DocsField // Name is the status, Type the schema
}

// DocsSchema is one schema of the docs page.
type DocsSchema struct {
	Name, Description string
	Fields            []DocsField
}

// DocsField is a parameter, a response or a schema's property.
type DocsField struct {
	Name, Type, Description string
	Required                bool
}

func refName(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

// typeOf writes a schema's type: its name, an array of it, or its JSON types.
func typeOf(sc schema) string {
	switch {
	case sc.Ref != "":
		return refName(sc.Ref)
	case sc.Items != nil:
		return "[" + typeOf(*sc.Items) + "]"
	case sc.Type != nil:
		if list, ok := sc.Type.([]any); ok {
			parts := make([]string, len(list))
			for i, t := range list {
				parts[i] = fmt.Sprint(t)
			}
			return strings.Join(parts, " | ")
		}
		return fmt.Sprint(sc.Type)
	}
	return "any"
}

// DocsPage reads the spec for the docs page.
func DocsPage() (Docs, error) {
	ends, err := Endpoints()
	if err != nil {
		return Docs{}, err
	}
	d := Docs{Title: specDoc.Info.Title, Version: specDoc.Info.Version, Description: specDoc.Info.Description}
	for _, e := range ends {
		op := specDoc.Paths[e.Path][strings.ToLower(e.Method)]
		o := DocsOperation{Method: e.Method, Path: e.Path, Summary: op.Summary, Secured: len(op.Security) > 0}
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = specDoc.Components.Parameters[refName(p.Ref)]
			}
			o.Params = append(o.Params, DocsField{Name: p.Name, Type: p.In, Description: p.Description, Required: p.Required})
		}
		codes := make([]string, 0, len(op.Responses))
		for c := range op.Responses {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		for _, c := range codes {
			r := op.Responses[c]
			if r.Ref != "" {
				r = specDoc.Components.Responses[refName(r.Ref)]
			}
			o.Responses = append(o.Responses, DocsField{Name: c, Description: r.Description})
		}
		d.Operations = append(d.Operations, o)
	}
	names := make([]string, 0, len(specDoc.Components.Schemas))
	for n := range specDoc.Components.Schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sc := specDoc.Components.Schemas[n]
		ds := DocsSchema{Name: n, Description: sc.Description}
		props := make([]string, 0, len(sc.Properties))
		for p := range sc.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		for _, p := range props {
			ds.Fields = append(ds.Fields, DocsField{Name: p, Type: typeOf(sc.Properties[p]), Description: sc.Properties[p].Description,
				Required: contains(sc.Required, p)})
		}
		d.Schemas = append(d.Schemas, ds)
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
