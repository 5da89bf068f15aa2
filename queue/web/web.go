// Package web is cortexq's web dashboard: server-rendered pages of progress, reports, runs,
// tasks and workers, read through the same calls as the CLI ([inspect.Reader], [reports.Store],
// [catalog.Catalog]), and the operator's actions (rerun, pause, resume, sandbox) behind people's
// tokens and roles (roles.go) or the admin token. Templates, CSS and the one small script (live figures on the overview) are
// embedded; every page works without it.
//
// Safety: every value from the database or from workers reaches the page through html/template
// (never template.HTML); pages carry a strict Content-Security-Policy (no inline script or
// style); actions are POSTs that need a server-side session (auth.go) of a role allowed them and
// a CSRF token bound to it, and append an audit row; a result's HTML preview is served with CSP sandbox, in an opaque
// origin, so its scripts never run with the dashboard's origin (or from a separate preview
// origin). Against hostile results and clients (docs/web.md#hostile-results) pages are bounded
// in bytes and in work, streamed, made at most HeavyLimit at once (the log pages LogLimit, in
// slots of their own) within PageDeadline, and text is shown through text.Printable.
//
// Under /api/v1 it serves the JSON twin of every page and action (api.go, docs/api.md): the
// types and OpenAPI contract of queue/api, read through the same calls within the same bounds;
// its actions take a person's token or the admin token as a bearer (authorize, the one place
// that decides who may act).
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/text"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures a dashboard.
type Config struct {
	// Base holds the rooms the pages read (catalog, inspect, reports); Store takes the actions.
	Base  *base.Base
	Store *lease.Store
	// Jobs are the background jobs the API and the pages may enqueue (nil: none).
	Jobs *jobs.Registry
	// AdminToken is the break-glass token of the owner admin (role admin); empty: none (people
	// still sign in with their own tokens, api_tokens).
	AdminToken string
	// ReadOnly refuses every action and sign-in, whatever the token.
	ReadOnly bool
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// LiveMaxAge is how long the overview's live figures are shared between browsers
	// (default 1.5 s, the browsers' quickest refresh).
	LiveMaxAge time.Duration
	// LiveBudget is the database time a second the live figures may cost, all browsers
	// together (default 5 ms): on a corpus where reading them is slow they refresh less often.
	LiveBudget time.Duration
	// HeavyLimit bounds the pages being made at once (every page but sign-in and the log pages;
	// not /live, the static files or the downloads): past it a request waits up to HeavyWait for
	// its turn, then gets 503 with Retry-After. Default HeavyLimitDefault.
	HeavyLimit int
	// LogLimit bounds the log pages being made at once, apart from HeavyLimit's, so that pages
	// of hostile results never take the others' turns: the pages that read a task's messages,
	// log or archives (the task page, its log, source file, view and previews) and the report's
	// messages. Default LogLimitDefault.
	LogLimit int
	// HeavyWait is how long a page waits for its turn (default 3 s).
	HeavyWait time.Duration
	// PageDeadline is how long a page may work once it has its turn (default 2 s): past it, the
	// parts whose work grows with what results hold (a log's lines, a task's or a what's
	// messages) stop, and the page shows what it has with a note (docs/web.md#hostile-results).
	PageDeadline time.Duration
	// PreviewOrigin, if set (https://preview.example.org), is the origin that serves the result
	// previews: the task page frames the preview from there, and a preview asked of any other
	// host is redirected to it. Without it previews come from the dashboard's own origin,
	// downloaded (not shown) when opened outside the task page's frame, and never as script.
	PreviewOrigin string
	// ReadTimeout, WriteTimeout and IdleTimeout are HTTPServer's (defaults 30 s, 2 min, 2 min):
	// a request's headers and body must arrive within ReadTimeout, its answer within WriteTimeout
	// (the archive downloads and previews get longer).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// PasskeyRPID, if set, turns passkeys on (docs/security.md#passkeys): the WebAuthn relying
	// party's id, the dashboard's domain as browsers reach it (cortexq.example.org; localhost for
	// tests, never an IP address). PasskeyOrigins are the origins browsers reach it at
	// (default https://PasskeyRPID).
	PasskeyRPID    string
	PasskeyOrigins []string
}

// HeavyLimitDefault is Config.HeavyLimit's default: the pages made at once. With each page at
// most maxPageBytes and its data bounded, 8 keep the process within about 100 MB whatever the
// results hold (docs/web.md#hostile-results).
const HeavyLimitDefault = 8

// LogLimitDefault is Config.LogLimit's default: the log pages made at once, each bounded like
// any page (docs/web.md#hostile-results).
const LogLimitDefault = 4

// maxPageBytes bounds a page: past it the page is cut (and a warning logged). The pages' own
// bounds (the log's 1 MiB, messages clipped) keep them well under it.
const maxPageBytes = 4_000_000

// maxFormBytes bounds a form's body.
const maxFormBytes = 64 << 10

// Server is the dashboard's http.Handler.
type Server struct {
	cfg     Config
	store   *lease.Store
	catalog *catalog.Catalog
	inspect *inspect.Reader
	reports *reports.Store
	logger  *slog.Logger
	pages   map[string]*template.Template
	mux     *http.ServeMux

	liveMu    sync.Mutex
	liveAt    time.Time
	liveCosts []time.Duration // the last three reads' durations
	live      []byte

	// The figures read from the attempts trail, refreshed in the background (trail).
	trail *background[trailFigures]

	// The workers' outcomes over the whole attempts trail (the workers page).
	outcomes *background[map[inspect.WorkerKey]inspect.WorkerOutcomes]
	// The dead letters (the dead letters page), found in the attempts trail.
	deadLetters *background[[]inspect.DeadLetter]

	signIn *signInLimiter
	heavy  chan struct{} // a slot for each page being made
	logs   chan struct{} // a slot for each log page being made
	// The log pages being made for every request that asks for them meanwhile (shared), and
	// a token for each request writing one.
	flightsMu sync.Mutex
	flights   map[string]*flight
	sharing   chan struct{}
	// previewURL is PreviewOrigin parsed, if one is set.
	previewURL *url.URL

	// patterns are the routes registered (handle), in order.
	patterns []string

	// webauthn is the passkeys' relying party (nil: passkeys off); ceremonies their pending
	// enrolments and sign-ins.
	webauthn   *webauthn.WebAuthn
	ceremonies ceremonies
}

// New returns a dashboard on cfg.Base and cfg.Store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Base == nil {
		return nil, errors.New("web: no base or store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LiveMaxAge <= 0 {
		cfg.LiveMaxAge = liveEvery
	}
	if cfg.LiveBudget <= 0 {
		cfg.LiveBudget = 5 * time.Millisecond
	}
	if cfg.HeavyLimit <= 0 {
		cfg.HeavyLimit = HeavyLimitDefault
	}
	if cfg.LogLimit <= 0 {
		cfg.LogLimit = LogLimitDefault
	}
	if cfg.HeavyWait <= 0 {
		cfg.HeavyWait = 3 * time.Second
	}
	if cfg.PageDeadline <= 0 {
		cfg.PageDeadline = 2 * time.Second
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{{&cfg.ReadTimeout, 30 * time.Second}, {&cfg.WriteTimeout, 2 * time.Minute}, {&cfg.IdleTimeout, 2 * time.Minute}} {
		if *d.p <= 0 {
			*d.p = d.def
		}
	}
	var preview *url.URL
	if cfg.PreviewOrigin != "" {
		u, err := url.Parse(cfg.PreviewOrigin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("--preview-origin %q: want scheme://host[:port], such as https://preview.example.org", cfg.PreviewOrigin)
		}
		preview = &url.URL{Scheme: u.Scheme, Host: u.Host}
		cfg.PreviewOrigin = preview.String()
	}
	var err error
	s := &Server{cfg: cfg, store: cfg.Store, catalog: cfg.Base.Catalog,
		inspect: cfg.Base.Inspect, reports: cfg.Base.Reports, logger: cfg.Logger,
		pages: map[string]*template.Template{}, mux: http.NewServeMux(),
		signIn: newSignInLimiter(), heavy: make(chan struct{}, cfg.HeavyLimit), logs: make(chan struct{}, cfg.LogLimit),
		flights: map[string]*flight{}, sharing: make(chan struct{}, maxSharing),
		previewURL: preview}
	if s.webauthn, err = newPasskeys(cfg); err != nil {
		return nil, err
	}
	s.trail = &background[trailFigures]{what: "the overview's attempts trail", read: s.readTrail, always: true}
	s.outcomes = &background[map[inspect.WorkerKey]inspect.WorkerOutcomes]{what: "worker outcomes", read: s.inspect.AllWorkerOutcomes}
	s.deadLetters = &background[[]inspect.DeadLetter]{what: "dead letters", read: func(ctx context.Context) ([]inspect.DeadLetter, error) {
		return s.inspect.DeadLetters(ctx, maxDeadRows+1)
	}}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, err
		}
		s.pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.handle("GET /{$}", s.page(s.overview))
	s.handle("GET /live", s.liveJSON)
	s.handle("GET /report", s.reportPage(s.report))
	s.handle("GET /task/{id}", s.logPage(s.task))
	s.handle("GET /task/{id}/source", s.download(false))
	s.handle("GET /task/{id}/result", s.download(true))
	s.handle("GET /task/{id}/log", s.logPage(s.taskLog))
	s.handle("GET /task/{id}/cortex.log", s.rawLog)
	s.handle("GET /task/{id}/preview/{member...}", s.inSlots(s.logs, s.preview))
	s.handle("GET /search", s.heavyOnly(s.search))
	s.handle("GET /dead", s.page(s.dead))
	s.handle("GET /workers/attempts", s.page(s.workerAttempts))
	s.handle("GET /task/{id}/view", s.logPage(s.taskView))
	s.handle("GET /task/{id}/file", s.logPage(s.sourceFile))
	s.handle("GET /runs", s.page(s.runs))
	s.handle("GET /runs/cell", s.page(s.diffCell))
	s.handle("GET /runs/time", s.page(s.runTime))
	s.handle("GET /runs/time.json", s.heavyOnly(s.runTimeJSON))
	s.handle("GET /workers", s.page(s.workers))
	s.handle("GET /login", s.light(s.loginPage))
	s.handle("GET /audit", s.page(s.auditPage))
	s.handle("GET /sessions", s.page(s.sessionsPage))
	s.handle("GET /passkeys", s.light(s.passkeysPage))
	s.handle("GET /lifecycle", s.page(s.lifecyclePage))
	s.handle("GET /jobs", s.page(s.jobsPage))
	for _, mu := range s.webMutations() {
		s.mutate(mu)
	}
	for _, mu := range s.passkeyMutations() {
		s.mutate(mu)
	}
	s.apiRoutes()
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	s.handle("GET /static/", http.StripPrefix("/static/", files).ServeHTTP)
	s.handle("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
}

// pageCSP is every page's Content-Security-Policy: nothing inline, nothing from elsewhere, and
// no framing but the task page's own preview frame (from the preview origin, if one is set).
func (s *Server) pageCSP() string {
	frame := "'self'"
	if s.previewURL != nil {
		frame = s.cfg.PreviewOrigin
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; frame-src " + frame + "; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
}

// previewCSP is the preview's: a sandbox without allow-same-origin (an opaque origin: no
// cookie, no storage, no access to the dashboard), scripts allowed only inside that sandbox.
const previewCSP = "sandbox allow-scripts; default-src 'self' data: 'unsafe-inline'; frame-ancestors 'self'"

// ServeHTTP serves the dashboard. A query whose names or values are not UTF-8 text without NUL
// is a 400 naming the parameter (text.CheckInput), before any handler sees it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", s.pageCSP())
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if s.previewURL != nil && s.onPreviewHost(r) && !strings.HasPrefix(r.URL.Path, "/task/") {
		// The preview origin serves previews only: no page, no cookie of the dashboard there.
		http.NotFound(w, r)
		return
	}
	if err := text.CheckInput("path", r.URL.Path); err != nil {
		s.fail(w, r, notText("%v", err))
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.fail(w, r, notText("bad query: %v", err))
		return
	}
	if err := checkValues(q); err != nil {
		s.fail(w, r, err)
		return
	}
	// The page's database calls end with its time to answer: on a link gone silent they fail
	// rather than wait (docs/operations.md#networks).
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.WriteTimeout)
	defer cancel()
	s.mux.ServeHTTP(w, r.WithContext(ctx))
}

// checkValues refuses a query or form whose names or values are not text (text.CheckInput).
func checkValues(v url.Values) error {
	for name, values := range v {
		if err := text.CheckInput("parameter name", name); err != nil {
			return notText("%v", err)
		}
		for _, x := range values {
			if err := text.CheckInput(name, x); err != nil {
				return notText("%v", err)
			}
		}
	}
	return nil
}

// parseForm reads a POST's form, at most maxFormBytes, and checks its values.
func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return badRequest("bad form: %v", err)
	}
	return checkValues(r.PostForm)
}

// HTTPServer returns an http.Server for the dashboard with its timeouts: a request's header
// within 10 s and its body within ReadTimeout (a body sent a byte a second is cut), an answer
// within WriteTimeout, an idle connection closed after IdleTimeout.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: min(10*time.Second, s.cfg.ReadTimeout),
		ReadTimeout: s.cfg.ReadTimeout, WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout}
}
