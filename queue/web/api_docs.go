package web

import (
	"net/http"

	"github.com/cortexq/cortexq/queue/api"
)

// apiDocs is the API's docs page (/api/v1/docs): the OpenAPI document rendered by the server,
// with no script and nothing from elsewhere.
func (s *Server) apiDocs(*http.Request) (view, error) {
	d, err := api.DocsPage()
	if err != nil {
		return view{}, err
	}
	return view{Page: "apidocs", Title: "API", Data: d}, nil
}
