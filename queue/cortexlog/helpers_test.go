package cortexlog

import (
	"bytes"
	"fmt"
	"os"

	"github.com/cortexq/cortexq/queue"
)

// fromArchive derives the report of the result archive at path, reading only its cortex.log.
// Every error wraps ErrUnusable.
func fromArchive(path string, opts Options) (queue.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return queue.Report{}, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return queue.Report{}, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	if !info.Mode().IsRegular() {
		return queue.Report{}, fmt.Errorf("%w: %s is not a regular file", ErrUnusable, path)
	}
	return FromReaderAt(f, info.Size(), opts)
}

// parseLog parses a whole log held in memory (no length limit).
func parseLog(data []byte) queue.Report {
	rep, _ := parse(bytes.NewReader(data), 1<<62, MaxMessagesDefault, int64(len(data)))
	return rep
}
