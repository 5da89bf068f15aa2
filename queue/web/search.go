package web

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue/inspect"
)

// maxSearchRows is how many tasks a search lists.
const maxSearchRows = 200

// minSearchText is the shortest text a search by entry takes: the trigram index answers from
// three characters on; fewer would read every task.
const minSearchText = 3

type searchPage struct {
	Q     string
	Tasks []inspect.FoundTask
	More  bool // the search found more than it lists
}

// search answers GET /search?q=: a task id goes to that task, other text lists the tasks whose
// entry holds it (docs/web.md#search).
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if id, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && id > 0 {
		ok, err := s.inspect.TaskExists(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ok {
			http.Redirect(w, r, "/task/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
			return
		}
	}
	s.light(func(r *http.Request) (view, error) {
		p := searchPage{Q: q}
		if q == "" {
			return view{Page: "search", Title: "Search", Data: p}, nil
		}
		if utf8.RuneCountInString(q) < minSearchText {
			return view{}, badRequest("search %q: give a task id, or at least %d characters of an entry", q, minSearchText)
		}
		found, err := s.inspect.SearchTasks(r.Context(), q, maxSearchRows+1)
		if err != nil {
			return view{}, err
		}
		p.More = len(found) > maxSearchRows
		p.Tasks = found[:min(len(found), maxSearchRows)]
		return view{Page: "search", Title: "Search " + q, Data: p}, nil
	})(w, r)
}
