// Package cortexlog turns a worker's result archive into a queue.Report: the task's status, the
// log messages to keep, and whether its Fatal is a retryable cause.
//
// An archive is a zip of which only the member named exactly cortex.log is read, through
// archive/zip's central directory, in memory and within limits (Options); nothing is ever
// extracted to disk. An archive that cannot be read at all is ErrUnusable, which the sink
// treats as an unusable reply rather than as a verdict.
//
// The log is parsed line by line (Parse):
//
//   - A message line is severity:category:what, then optionally one space and details. Severity
//     and category contain neither a space nor a colon; what runs to the first space and may
//     contain colons and tabs. Lines end in \n or \r\n; empty lines are skipped.
//   - A line starting with a tab directly after a message (or after another such line) continues
//     that message: it is appended to its details after a "\n", tab kept.
//   - "(Loading path/name...)" and "(Processing definitions path/name...)" lines become an Info
//     message, category loaded_file, what the file name, details the full path.
//   - Fields are decoded lossily (each invalid UTF-8 byte becomes U+FFFD), NULs are removed, and
//     the result is cut on a character boundary strictly below its column limit (category 100,
//     what 200, a loaded file name 100, details 2000 bytes).
//   - Fatal:invalid:X details is rewritten to an Invalid message, category X, what "all".
//
// Status derivation: start at Fatal; any Invalid message makes the status Invalid for good; an
// Info-type message (Info, Status, Debug, … in any case) of category exactly "conversion" with a
// non-empty what is the status line, N = what as a 32-bit integer (3 if it is not one), status
// queue.StatusFromConversion(N) unless already Invalid; the last status line wins and is not
// stored. An Info:cortex:retryable line (severity "info" in any case) sets Report.Retryable and
// is not stored either, nor is an Info-type Info:cortexq:stage_ms line, the worker's stage timings
// (Report.Stages, queue.ParseStageLine; docs/stages.md#the-stage-line).
//
// Beyond the reference format, and to keep hostile logs bounded: at most Options.MaxMessages
// messages of each severity are stored, as in CorTeX (the rest still count for the status, and
// for each severity that overflowed one message cortex/messages_truncated of that severity gives
// the exact total: "N warning messages in all; the first M were kept"); the log is read line by
// line, and a line longer than 64 KiB is parsed from its first 64 KiB (the rest is skipped), so
// that reading costs memory for the messages kept, not for the log; a log that is not valid
// UTF-8 gets a Warning cortex/non_utf8_log; a log
// longer than Options.MaxLogBytes is read up to that limit, its cut last line dropped, and gets a
// Warning cortex/log_truncated (its status line, usually last, is then lost, so the verdict falls
// back to Fatal). These warnings come after the log's own messages, in that order.
package cortexlog
