package worker

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Handler converts one task's input archive into its result archive.
type Handler interface {
	// Convert reads the input archive at path in and writes the result archive to path out
	// (a file it creates; its directory exists). Both live in a scratch directory of their own
	// that is removed, with anything else Convert leaves there, once the result is sent.
	//
	// The result is sent as written: a zip whose cortex.log member the dispatcher reads. An
	// empty out file is sent as an empty result. A returned error (or a missing out file) sends
	// an empty result too, which the dispatcher treats as unusable and leaves to its reaper to
	// retry; a conversion that ran and failed should instead return nil and say so in
	// cortex.log. ctx is cancelled when Run is stopping.
	Convert(ctx context.Context, in, out string) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, in, out string) error

// Convert calls f.
func (f HandlerFunc) Convert(ctx context.Context, in, out string) error { return f(ctx, in, out) }

// MemoryHandler is a Handler that can also convert a payload held in memory, sparing the
// scratch files. The loop uses ConvertBytes for payloads of at most Config.MemoryPayloadMax bytes
// and Convert for larger ones. The result follows Convert's rules (an empty result or an error sends
// an empty result); ConvertBytes may return in itself, and must not keep it.
type MemoryHandler interface {
	Handler
	ConvertBytes(ctx context.Context, in []byte) ([]byte, error)
}

// MemoryPayloadMax is the default of Config.MemoryPayloadMax.
const MemoryPayloadMax = 16 << 20

// Echo is a Handler whose result is a byte-for-byte copy of its input.
type Echo struct{}

// ConvertBytes returns the payload as the result.
func (Echo) ConvertBytes(ctx context.Context, in []byte) ([]byte, error) {
	return in, ctx.Err()
}

// Convert copies in to out.
func (Echo) Convert(ctx context.Context, in, out string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	src, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("echo: copy: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	return nil
}
