package web

// APIRoutes lists the API routes the server registers, as "METHOD /path".
func (s *Server) APIRoutes() []string {
	var out []string
	for _, rt := range s.apiRouteTable() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// Patterns lists every route the server registered, as its ServeMux pattern.
func (s *Server) Patterns() []string { return append([]string(nil), s.patterns...) }
