package api

import (
	"time"

	"github.com/cortexq/cortexq/queue/reports"
)

// The answers of the API (and of the CLI's --json), one type per question. Their JSON names are
// the spec's (openapi.yaml, components.schemas); a test validates every answer against it.

// Error is every error's body: a code a script can switch on and a message for a person.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Endpoint is one operation of the API.
type Endpoint struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	Operation string `json:"operation"`
	Summary   string `json:"summary"`
	// Mutates: the operation changes something, and needs the admin token.
	Mutates bool `json:"mutates"`
}

// Index is GET /api/v1: every endpoint, the spec and its docs.
type Index struct {
	Version   string     `json:"version"`
	Spec      string     `json:"spec"`
	Docs      string     `json:"docs"`
	Endpoints []Endpoint `json:"endpoints"`
}

// ScopeStatus is the progress of one corpus and service: cortexq status's row, the
// overview's.
type ScopeStatus struct {
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	// Tasks by status; Done counts the final ones.
	Tasks      int64 `json:"tasks"`
	Todo       int64 `json:"todo"`
	Dispatched int64 `json:"dispatched"`
	NoProblem  int64 `json:"no_problem"`
	Warning    int64 `json:"warning"`
	Error      int64 `json:"error"`
	Fatal      int64 `json:"fatal"`
	Invalid    int64 `json:"invalid"`
	Blocked    int64 `json:"blocked"`
	Done       int64 `json:"done"`
	// Dispatch rows: reserved by a replica, leases out, held for late results, retries queued;
	// and the tasks whose current run gave up.
	Reserved    int64 `json:"reserved"`
	InFlight    int64 `json:"in_flight"`
	Settling    int64 `json:"settling"`
	Queued      int64 `json:"queued"`
	DeadLetters int64 `json:"dead_letters"`
	// The last minute's replies and leases, and the corpus's share of its service's leases (0
	// to 1): its fair share as served.
	RepliesLastMinute int64   `json:"replies_last_minute"`
	LeasesLastMinute  int64   `json:"leases_last_minute"`
	LeaseShare        float64 `json:"lease_share"`
	// Paused: tasks of it are blocked (cortexq pause).
	Paused bool `json:"paused"`
}

// Status is every corpus and service's progress.
type Status struct {
	Scopes []ScopeStatus `json:"scopes"`
}

// Corpora is cortexq corpus list: the fair share of each corpus and service.
type Corpora struct {
	Corpora []CorpusShare `json:"corpora"`
}

// CorpusShare is one corpus and service's fair share.
type CorpusShare struct {
	Corpus           string  `json:"corpus"`
	Service          string  `json:"service"`
	Sandbox          bool    `json:"sandbox"`
	Weight           int32   `json:"weight"`
	Priority         int32   `json:"priority"`
	Todo             int64   `json:"todo"`
	LeasesLastMinute int64   `json:"leases_last_minute"`
	LeaseShare       float64 `json:"lease_share"`
}

// Services is cortexq service list.
type Services struct {
	Services []Service `json:"services"`
}

// Service is one service; LeaseTimeoutSeconds 0 is the replica's default.
type Service struct {
	ID                  int32   `json:"id"`
	Name                string  `json:"name"`
	LeaseTimeoutSeconds float64 `json:"lease_timeout_seconds"`
}

// Sandboxes lists the sandbox corpora.
type Sandboxes struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Sandbox is one sandbox corpus of a parent.
type Sandbox struct {
	ID        int32     `json:"id"`
	Name      string    `json:"name"`
	Parent    string    `json:"parent"`
	CreatedAt time.Time `json:"created_at"`
	Tasks     int64     `json:"tasks"`
}

// ReportRow is one row of a report rung: a status or severity, a category or a what, with its
// tasks, their messages, and the tasks' share (0 to 1) of the rung's Of.
type ReportRow struct {
	Name     string  `json:"name"`
	Tasks    int64   `json:"tasks"`
	Messages int64   `json:"messages"`
	Share    float64 `json:"share"`
}

// ReportSeverities is the report's first rung: tasks by status (with their messages of the
// status's severity), or with All the messages by severity in every task.
type ReportSeverities struct {
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	All     bool   `json:"all"`
	// Tasks counts every task; Of the tasks the shares are of (all but the invalid ones by
	// status, all of them with All).
	Tasks int64       `json:"tasks"`
	Of    int64       `json:"of"`
	Rows  []ReportRow `json:"rows"`
	// Rerun is the cortexq command that reruns the rung's slice (the API's: POST …/rerun).
	Rerun string `json:"rerun"`
}

// Fold says how fresh the category and what rungs' counts (the report rollups) are.
type Fold struct {
	FoldedAt   *time.Time `json:"folded_at"`
	AgeSeconds float64    `json:"age_seconds"`
	Pending    int64      `json:"pending"`
	Standby    bool       `json:"standby"`
}

// ReportNames is the report's second and third rungs: a severity's categories, a category's
// whats, a page of them (Offset, Limit) of Count in all, most tasks first.
type ReportNames struct {
	Corpus   string `json:"corpus"`
	Service  string `json:"service"`
	Severity string `json:"severity"`
	Category string `json:"category,omitempty"`
	All      bool   `json:"all"`
	// Level is category or what.
	Level      string      `json:"level"`
	Of         int64       `json:"of"`
	Count      int64       `json:"count"`
	Offset     int         `json:"offset"`
	Limit      int         `json:"limit"`
	NextOffset *int        `json:"next_offset,omitempty"`
	Rows       []ReportRow `json:"rows"`
	// Fold is nil in the all-tasks view (read from its own rollups, kept with each fold).
	Fold  *Fold  `json:"fold,omitempty"`
	Rerun string `json:"rerun"`
}

// ReportTasks is the report's last rung: the messages of one what with their tasks, a page of
// them by task.
type ReportTasks struct {
	Corpus     string       `json:"corpus"`
	Service    string       `json:"service"`
	Severity   string       `json:"severity"`
	Category   string       `json:"category"`
	What       string       `json:"what"`
	All        bool         `json:"all"`
	Offset     int          `json:"offset"`
	Limit      int          `json:"limit"`
	NextOffset *int         `json:"next_offset,omitempty"`
	Tasks      []ReportTask `json:"tasks"`
	// Late: the messages were not read within the request's deadline (the dashboard's page
	// deadline); Tasks is then empty.
	Late  bool   `json:"late"`
	Rerun string `json:"rerun"`
}

// ReportTask is a message of a what with its task; Details is clipped (DetailsBytes is its
// length before).
type ReportTask struct {
	TaskID       int64  `json:"task_id"`
	Entry        string `json:"entry"`
	Details      string `json:"details"`
	DetailsBytes int    `json:"details_bytes"`
	// Status is the task's status, in the all-tasks view.
	Status string `json:"status,omitempty"`
	Task   string `json:"task"`
}

// Stages is where the time of a run (or of a service over all its corpora) went: the stage
// summary and the slowest tasks (docs/stages.md; cortexq runs --stages --json).
type Stages struct {
	Corpus  string               `json:"corpus,omitempty"`
	Service string               `json:"service"`
	Run     int64                `json:"run,omitempty"`
	Summary reports.StageSummary `json:"summary"`
	Slowest []reports.TaskStages `json:"slowest"`
}

// Runs is the run history of a corpus and service, oldest first.
type Runs struct {
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	Runs    []Run  `json:"runs"`
}

// Run is one run: a closed one with the tallies it ended with, the open one (EndedAt nil) with
// its current tallies.
type Run struct {
	ID        int64      `json:"id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Note      string     `json:"note"`
	// Owner is who started the run, for a run imported from CorTeX (omitted otherwise).
	Owner     string `json:"owner,omitempty"`
	Tasks     int64  `json:"tasks"`
	Todo      int64  `json:"todo"`
	InFlight  int64  `json:"in_flight"`
	NoProblem int64  `json:"no_problem"`
	Warning   int64  `json:"warning"`
	Error     int64  `json:"error"`
	Fatal     int64  `json:"fatal"`
	Invalid   int64  `json:"invalid"`
	Blocked   int64  `json:"blocked"`
}

// Diff is the matrix of two runs: the tasks by their status in From (new: not a task then)
// and in To (0: the open run, now).
type Diff struct {
	Corpus  string     `json:"corpus"`
	Service string     `json:"service"`
	From    int64      `json:"from"`
	To      int64      `json:"to"`
	Cells   []DiffCell `json:"cells"`
	// Fold and SweptAt, for the kept matrix of the last closed run and the open one: how fresh
	// its counts are (as of the last fold; todo, in_flight and blocked as of the last sweep).
	Fold    *Fold      `json:"fold,omitempty"`
	SweptAt *time.Time `json:"swept_at,omitempty"`
}

// DiffCell is one cell of a diff with tasks in it.
type DiffCell struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Tasks int64  `json:"tasks"`
}

// DiffTasks is a page of the tasks of one cell of a diff.
type DiffTasks struct {
	Corpus     string     `json:"corpus"`
	Service    string     `json:"service"`
	From       int64      `json:"from"`
	To         int64      `json:"to"`
	FromStatus string     `json:"from_status"`
	ToStatus   string     `json:"to_status"`
	Offset     int        `json:"offset"`
	Limit      int        `json:"limit"`
	NextOffset *int       `json:"next_offset,omitempty"`
	Tasks      []DiffTask `json:"tasks"`
}

// DiffTask is a task of a diff's cell.
type DiffTask struct {
	TaskID int64  `json:"task_id"`
	Entry  string `json:"entry"`
}

// Task is everything on record about one task but its messages (TaskMessages).
type Task struct {
	ID      int64  `json:"id"`
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	Entry   string `json:"entry"`
	Status  string `json:"status"`
	// Run is the task's own run counter; CurrentRun the corpus and service's run (the runs'
	// ids) its current status belongs to.
	Run        int32          `json:"run"`
	CurrentRun int64          `json:"current_run"`
	Attempts   []TaskAttempt  `json:"attempts"`
	Dispatch   []TaskDispatch `json:"dispatch"`
	Links      TaskLinks      `json:"links"`
}

// TaskAttempt is one dispatch attempt of a task; RunID is the corpus and service's run open
// when it was leased.
type TaskAttempt struct {
	Run        int32      `json:"run"`
	Attempt    int32      `json:"attempt"`
	RunID      int64      `json:"run_id"`
	Worker     string     `json:"worker"`
	Replica    string     `json:"replica"`
	LeasedAt   time.Time  `json:"leased_at"`
	AnsweredAt *time.Time `json:"answered_at"`
	Outcome    string     `json:"outcome"`
	Status     string     `json:"status,omitempty"`
}

// TaskDispatch is a dispatch row of a task (one per run that was dispatched).
type TaskDispatch struct {
	Run          int32      `json:"run"`
	State        string     `json:"state"`
	Retries      int32      `json:"retries"`
	DeadLettered bool       `json:"dead_lettered"`
	Replica      string     `json:"replica"`
	LeasedAt     time.Time  `json:"leased_at"`
	Deadline     time.Time  `json:"deadline"`
	ReceivedAt   *time.Time `json:"received_at"`
}

// TaskLinks are a task's other resources: its messages, its page, its archives' downloads
// (whether they are there is up to the disk: a 404 says).
type TaskLinks struct {
	Messages string `json:"messages"`
	Page     string `json:"page"`
	Source   string `json:"source"`
	Result   string `json:"result"`
	Log      string `json:"log"`
}

// TaskMessages is a page of a task's messages, by run and order.
type TaskMessages struct {
	TaskID     int64         `json:"task_id"`
	Offset     int           `json:"offset"`
	Limit      int           `json:"limit"`
	NextOffset *int          `json:"next_offset,omitempty"`
	Messages   []TaskMessage `json:"messages"`
	Late       bool          `json:"late"`
}

// TaskMessage is one message; Details is clipped (DetailsBytes is its length before).
type TaskMessage struct {
	Run          int32  `json:"run"`
	Severity     string `json:"severity"`
	Category     string `json:"category"`
	What         string `json:"what"`
	Details      string `json:"details"`
	DetailsBytes int    `json:"details_bytes"`
}

// Workers is the workers page: each worker by name and service.
type Workers struct {
	Workers []Worker `json:"workers"`
	// Leases out now, and the workers by state.
	Leases int `json:"leases"`
	Active int `json:"active"`
	Idle   int `json:"idle"`
	Gone   int `json:"gone"`
}

// Worker is one worker of a service.
type Worker struct {
	Worker      string     `json:"worker"`
	Service     string     `json:"service"`
	State       string     `json:"state"`
	FirstSeen   time.Time  `json:"first_seen"`
	LastSeen    *time.Time `json:"last_seen"`
	Dispatched  int64      `json:"dispatched"`
	Results     int64      `json:"results"`
	Accepted    int64      `json:"accepted"`
	Expired     int64      `json:"expired"`
	LeasesHour  int64      `json:"leases_last_hour"`
	LeasesNow   int        `json:"leases_now"`
	ResultsRate float64    `json:"results_per_minute"`
}

// WorkerAttempts lists a worker's latest attempts, newest first.
type WorkerAttempts struct {
	Worker   string          `json:"worker"`
	Attempts []WorkerAttempt `json:"attempts"`
}

// WorkerAttempt is one attempt of a worker.
type WorkerAttempt struct {
	TaskID     int64      `json:"task_id"`
	Corpus     string     `json:"corpus"`
	Service    string     `json:"service"`
	Entry      string     `json:"entry"`
	Run        int32      `json:"run"`
	Attempt    int32      `json:"attempt"`
	Replica    string     `json:"replica"`
	LeasedAt   time.Time  `json:"leased_at"`
	AnsweredAt *time.Time `json:"answered_at"`
	Outcome    string     `json:"outcome"`
	Status     string     `json:"status,omitempty"`
}

// Leases lists the leases out now, by deadline.
type Leases struct {
	Leases []Lease `json:"leases"`
}

// Lease is one lease out.
type Lease struct {
	TaskID   int64     `json:"task_id"`
	Corpus   string    `json:"corpus"`
	Service  string    `json:"service"`
	Entry    string    `json:"entry"`
	Run      int32     `json:"run"`
	Attempt  int32     `json:"attempt"`
	Worker   string    `json:"worker"`
	Replica  string    `json:"replica"`
	LeasedAt time.Time `json:"leased_at"`
	Deadline time.Time `json:"deadline"`
}

// DeadLetters lists the tasks whose current run gave up (More: there are more than listed).
type DeadLetters struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	More        bool         `json:"more"`
	AgeSeconds  float64      `json:"age_seconds"`
}

// DeadLetter is one dead-lettered task.
type DeadLetter struct {
	TaskID       int64     `json:"task_id"`
	Corpus       string    `json:"corpus"`
	Service      string    `json:"service"`
	Entry        string    `json:"entry"`
	Run          int32     `json:"run"`
	Cause        string    `json:"cause"`
	LastLeasedAt time.Time `json:"last_leased_at"`
}

// Retries lists the tasks queued for a retry.
type Retries struct {
	Retries []Retry `json:"retries"`
	More    bool    `json:"more"`
}

// Retry is one task queued for a retry.
type Retry struct {
	TaskID    int64     `json:"task_id"`
	Corpus    string    `json:"corpus"`
	Service   string    `json:"service"`
	Entry     string    `json:"entry"`
	Run       int32     `json:"run"`
	Retries   int32     `json:"retries"`
	LastCause string    `json:"last_cause"`
	LeasedAt  time.Time `json:"leased_at"`
}

// Replicas lists the replicas on record and their share of the work now.
type Replicas struct {
	Replicas []Replica `json:"replicas"`
}

// Replica is one replica: up, stopped, gone or unknown.
type Replica struct {
	Replica           string     `json:"replica"`
	State             string     `json:"state"`
	InFlight          int64      `json:"in_flight"`
	Reserved          int64      `json:"reserved"`
	LeasesLastMinute  int64      `json:"leases_last_minute"`
	ResultsLastMinute int64      `json:"results_last_minute"`
	LastLeasedAt      *time.Time `json:"last_leased_at"`
	LastReaperPass    *time.Time `json:"last_reaper_pass"`
	SeenAt            *time.Time `json:"seen_at"`
}

// Search is the tasks whose entry holds a text, or the task of an id.
type Search struct {
	Query string      `json:"query"`
	Tasks []FoundTask `json:"tasks"`
	More  bool        `json:"more"`
}

// FoundTask is one task a search found.
type FoundTask struct {
	ID      int64  `json:"id"`
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	Entry   string `json:"entry"`
	Status  string `json:"status"`
	Run     int32  `json:"run"`
	Task    string `json:"task"`
}

// Why is cortexq why: the causes holding a corpus and service back.
type Why struct {
	Corpus  string   `json:"corpus"`
	Service string   `json:"service"`
	Reasons []Reason `json:"reasons"`
}

// Reason is one cause, with what shows it and the command that acts on it.
type Reason struct {
	Cause    string `json:"cause"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix"`
}

// Slice is the body of a rerun or a sandbox: a slice of the report (empty: every task; a
// rerun of every task needs Every).
type Slice struct {
	Severity string `json:"severity,omitempty"`
	Category string `json:"category,omitempty"`
	What     string `json:"what,omitempty"`
	// All: Severity names messages in tasks of any status (the all-tasks view).
	All bool `json:"all,omitempty"`
	// Every confirms a rerun of every task of the corpus and service.
	Every bool `json:"every,omitempty"`
	// Name is a sandbox's name (POST .../sandboxes only).
	Name string `json:"name,omitempty"`
}

// Rerun is what a rerun did: the tasks back to TODO in a new run (Run; Previous the run it
// closed).
type Rerun struct {
	Corpus     string `json:"corpus"`
	Service    string `json:"service"`
	Slice      string `json:"slice"`
	Tasks      int    `json:"tasks"`
	Settled    int    `json:"settled"`
	Unreserved int    `json:"unreserved"`
	Run        int64  `json:"run"`
	Previous   int64  `json:"previous"`
	// DryRun: a preview (dry_run=true): Tasks would go back to TODO, nothing changed.
	DryRun bool `json:"dry_run,omitempty"`
}

// Paused is what a pause did.
type Paused struct {
	Corpus     string `json:"corpus"`
	Service    string `json:"service"`
	Blocked    int    `json:"blocked"`
	Unreserved int    `json:"unreserved"`
	Requeued   int    `json:"requeued"`
}

// Resumed is what a resume did.
type Resumed struct {
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	Resumed int    `json:"resumed"`
}

// SandboxMade is a sandbox made of a slice.
type SandboxMade struct {
	Name     string `json:"name"`
	ID       int32  `json:"id"`
	Parent   string `json:"parent"`
	Service  string `json:"service"`
	Tasks    int64  `json:"tasks"`
	Priority int32  `json:"priority"`
}

// SandboxDeleted is what deleting a sandbox removed.
type SandboxDeleted struct {
	Name     string `json:"name"`
	Tasks    int    `json:"tasks"`
	Archives int    `json:"archives"`
}

// ServiceNew is the body of POST /api/v1/services (cortexq service add).
type ServiceNew struct {
	Name                string `json:"name"`
	LeaseTimeoutSeconds int32  `json:"lease_timeout_seconds,omitempty"`
}

// CorpusNew is the body of POST /api/v1/corpora (cortexq corpus add): a corpus registered at
// Path and imported for Service.
type CorpusNew struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Service string `json:"service"`
}

// Activation is what activating a service on a corpus did (or, with dry_run, would read).
type Activation struct {
	Corpus    string `json:"corpus"`
	Service   string `json:"service"`
	DryRun    bool   `json:"dry_run"`
	Entries   int64  `json:"entries"`
	Added     int64  `json:"added"`
	RunOpened bool   `json:"run_opened"`
}

// Extension is what extending a corpus did.
type Extension struct {
	Corpus   string   `json:"corpus"`
	Services []string `json:"services"`
	Entries  int64    `json:"entries"`
	Added    int64    `json:"added"`
	Skipped  int      `json:"skipped"`
}

// Removal is what a deletion (corpus, service, or a service's tasks of a corpus) removed, or
// with dry_run would remove: rows per table; the runs stay with their tallies.
type Removal struct {
	Target       string           `json:"target"`
	DryRun       bool             `json:"dry_run"`
	Rows         int64            `json:"rows"`
	Tables       map[string]int64 `json:"tables"`
	RunsClosed   int64            `json:"runs_closed"`
	RunsDetached int64            `json:"runs_detached"`
	Files        int              `json:"files"`
}

// AuditRow is one row of the audit log (docs/audit-log.md).
type AuditRow struct {
	ID         int64          `json:"id"`
	At         time.Time      `json:"at"`
	DBRole     string         `json:"db_role"`
	Actor      string         `json:"actor"`
	Surface    string         `json:"surface"`
	Action     string         `json:"action"`
	Target     string         `json:"target"`
	Parameters map[string]any `json:"parameters"`
	Matched    *int64         `json:"matched"`
	Outcome    string         `json:"outcome"`
	Error      string         `json:"error"`
}

// AuditLog is the audit log's rows, newest first.
type AuditLog struct {
	Rows []AuditRow `json:"rows"`
}

// Session is a sign-in session (docs/security.md#sessions).
type Session struct {
	ID        int64      `json:"id"`
	Owner     string     `json:"owner"`
	Role      string     `json:"role"`
	TokenID   *int64     `json:"token_id"`
	StartedAt time.Time  `json:"started_at"`
	LastSeen  time.Time  `json:"last_seen"`
	ExpiresAt time.Time  `json:"expires_at"`
	Remote    string     `json:"remote"`
	UserAgent string     `json:"user_agent"`
	EndedAt   *time.Time `json:"ended_at"`
	EndedWhy  string     `json:"ended_why"`
	Current   bool       `json:"current"`
}

// Sessions lists sessions, newest first.
type Sessions struct {
	Sessions []Session `json:"sessions"`
}

// Ended is what revoking did: the tokens revoked and the sessions ended.
type Ended struct {
	Tokens   int64 `json:"tokens"`
	Sessions int64 `json:"sessions"`
}

// TokenMade is a token just made: its value is shown this once.
type TokenMade struct {
	ID        int64      `json:"id"`
	Owner     string     `json:"owner"`
	Role      string     `json:"role"`
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// TokenRequest asks for a token: its owner, role and lifetime in seconds (0: never expires).
type TokenRequest struct {
	Owner   string `json:"owner"`
	Role    string `json:"role"`
	Expires int64  `json:"expires"`
}
