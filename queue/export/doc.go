// Package export bundles a corpus's result archives (or their HTML only) of chosen severities
// into one ZIP file per group (month of the arXiv identifier, severity, or none), with a
// manifest beside them: `cortexq export`, and the export job. See
// docs/operations.md#exporting-a-dataset.
//
// It is resumable and streams: a first pass reads the tasks a page at a time (each page its own
// query, no long transaction) and spools each group's entries to a file; a second writes each
// group's archive aside (a dot name) and renames it when complete, then rewrites the manifest.
// An archive the manifest lists with the same counts and its recorded size is kept; any other
// is rebuilt; a run that changes nothing writes nothing.
package export
