package web

// APIRoutes lists the API routes the server registers, as "METHOD /path".
func (s *Server) APIRoutes() []string {
	var out []string
	for _, rt := range s.apiRouteTable() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}
