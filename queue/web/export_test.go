package web

import "time"

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

// StopSignInClock stops the sign-in limits' clock at now: their buckets refill no more while a
// test counts attempts, however slowly it runs.
func (s *Server) StopSignInClock() {
	now := time.Now()
	s.signIn.mu.Lock()
	defer s.signIn.mu.Unlock()
	s.signIn.now = func() time.Time { return now }
}
