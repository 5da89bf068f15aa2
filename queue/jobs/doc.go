// Package jobs runs long operations (an import, an export, a verify, ...) as background jobs on
// River: the dashboard, the API and `cortexq ... --detach` enqueue them (Enqueue) and answer with
// the job's id; a Runner (in `cortexq serve` and `cortexq jobs work`) works them.
//
// A job is a row of the jobs table (migrations/00039_jobs.sql): its handle, progress (done of
// total, a cursor the operation persists), heartbeat and outcome. River carries its attempts:
// each attempt is one river_job row whose id the job row names. A running attempt beats every
// Config.Beat; a job whose heartbeat is older than its timeout is marked interrupted by any
// runner's sweep, which enqueues a new attempt that resumes from the cursor (Sweep). An
// operation must therefore be idempotent, and resume from its cursor. It works in batches, each
// its own transaction.
//
// An operation is an Op; Define makes one from a function of typed arguments. See
// docs/operations.md#background-jobs.
package jobs
