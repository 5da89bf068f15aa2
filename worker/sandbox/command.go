package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Command is a worker's handler (worker.HandlerFunc) that runs a converter program per task,
// with {in} and {out} replaced in argv, killed after timeout (0: never), in sb.
func (sb *Sandbox) Command(argv []string, timeout time.Duration) func(ctx context.Context, in, out string) error {
	return func(ctx context.Context, in, out string) error {
		spec := Spec{Timeout: timeout}
		cin, cout := in, out // the paths as CMD sees them
		outHost := ""
		if sb.Mode() == Bwrap {
			if err := sb.ExposePath(filepath.Dir(in)); err != nil {
				return err
			}
			if err := sb.Expose(in); err != nil {
				return err
			}
			cin, cout = "/task/in/"+filepath.Base(in), OutDir+"/"+filepath.Base(out)
			outHost = filepath.Join(filepath.Dir(out), "sandbox-out")
			spec.Mounts, spec.OutHost, spec.Dir = []Mount{{Host: in, Sandbox: cin}}, outHost, OutDir
		}
		if timeout > 0 {
			backstop := timeout
			if sb.Mode() == Bwrap {
				backstop += 15 * time.Second // the sandbox ends CMD at timeout itself
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, backstop)
			defer cancel()
		}
		spec.Argv = make([]string, len(argv))
		for i, a := range argv {
			spec.Argv[i] = strings.NewReplacer("{in}", cin, "{out}", cout).Replace(a)
		}
		var output tail
		spec.Stdout, spec.Stderr = &output, &output
		r := sb.Run(ctx, spec)
		switch {
		case r.TimedOut || errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("%s: killed after %s", argv[0], timeout)
		case r.Err != nil:
			return fmt.Errorf("%s: %w: %s", argv[0], r.Err, lastLine(output.String(), 200))
		case r.Limit != "":
			return fmt.Errorf("%s: sandbox %s reached: %s", argv[0], r.Limit, lastLine(output.String(), 200))
		case r.Signal != 0:
			return fmt.Errorf("%s: signal: %s: %s", argv[0], r.Signal, lastLine(output.String(), 200))
		case r.ExitCode != 0:
			return fmt.Errorf("%s: exit status %d: %s", argv[0], r.ExitCode, lastLine(output.String(), 200))
		case r.OutErr != nil:
			return fmt.Errorf("%s: %w", argv[0], r.OutErr)
		}
		if outHost != "" {
			// Only the file named {out} is taken from what CMD left in the sandbox.
			if err := os.Rename(filepath.Join(outHost, filepath.Base(out)), out); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s: result: %w", argv[0], err)
			}
		}
		return nil
	}
}

// tail keeps the last 4 KiB of a command's output.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
