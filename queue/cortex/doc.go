// Package cortex imports a CorTeX database (github.com/dginev/CorTeX, its diesel schema) into
// cortexq's: services, corpora and sandboxes, each corpus's entries, every task with its status,
// the messages of the finished tasks, the run history with its snapshots, the workers and the
// task runtimes. docs/operations.md ("Moving from CorTeX") says how an operator uses it.
//
// CorTeX's side is only read: one REPEATABLE READ READ ONLY transaction, so every table is read
// as of one moment, and rows go out by COPY TO, piped straight into COPY FROM on cortexq's side
// (memory does not grow with the rows). Its shape is checked first: a missing table or column is
// an error naming it, before anything is written.
//
// cortexq's side is written one transaction per step: the registry (services and corpora), then
// each corpus (its tasks, messages and runs), then the workers. Each step is idempotent: rows are
// matched by their natural keys (a service's name, a corpus's name, a task's corpus, service and
// entry; a run by its CorTeX id in cortex_runs), so an import stopped anywhere and run again ends
// as one that ran through, and a second import adds only what changed. A task already imported
// takes CorTeX's new status (and messages) only if cortexq left it as imported.
//
// The SQL is in this package, not in sql/*.sql: COPY and the per-import temp tables are beyond
// sqlc.
package cortex
