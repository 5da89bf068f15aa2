package wire

import (
	"errors"
	"fmt"
	"io"
)

// SendFunc sends one frame of a multipart message; more is set on every frame but the last.
// The frame's bytes are only valid during the call (ZeroMQ's send copies them).
type SendFunc func(frame []byte, more bool) error

// ErrPayloadRead is what a WriteChunks error that came from reading the payload, not from
// sending it, matches with errors.Is.
var ErrPayloadRead = errors.New("read payload")

// Chunker cuts payloads into frames with one reusable buffer, so a loop that sends many
// payloads allocates once. A Chunker is not safe for concurrent use.
type Chunker struct {
	buf []byte
}

// NewChunker returns a Chunker that cuts frames of size bytes (MessageSize if size ≤ 0).
func NewChunker(size int) *Chunker {
	if size <= 0 {
		size = MessageSize
	}
	return &Chunker{buf: make([]byte, size)}
}

// Size reports the chunk size.
func (c *Chunker) Size() int { return len(c.buf) }

// WriteChunks reads r to its end and sends it as frames. Every frame but the last is exactly
// Size bytes and sent with more set; the last is shorter — empty when r is empty or its length
// is an exact multiple of Size — and sent with more unset. Reads fill each chunk fully
// (io.ReadFull), so a short read never ends the payload early.
//
// A read error is returned without ending the message: a payload cut short must never reach
// the peer looking whole. The socket is then in the middle of a multipart message, and so is a
// socket after a send error: the caller must close it with linger 0 (libzmq drops an
// unfinished message with its pipe) and open a new one.
func (c *Chunker) WriteChunks(r io.Reader, send SendFunc) error {
	if len(c.buf) == 0 {
		c.buf = make([]byte, MessageSize)
	}
	for {
		n, err := io.ReadFull(r, c.buf)
		switch {
		case err == nil:
			if err := send(c.buf, true); err != nil {
				return fmt.Errorf("send chunk: %w", err)
			}
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			if err := send(c.buf[:n], false); err != nil {
				return fmt.Errorf("send last chunk: %w", err)
			}
			return nil
		default:
			return fmt.Errorf("%w: %w", ErrPayloadRead, err)
		}
	}
}

// SendChunks sends data as WriteChunks sends a reader's bytes, straight from data: the
// framing of a payload already in memory.
func (c *Chunker) SendChunks(data []byte, send SendFunc) error {
	size := len(c.buf)
	if size == 0 {
		size = MessageSize
	}
	for len(data) >= size {
		if err := send(data[:size], true); err != nil {
			return fmt.Errorf("send chunk: %w", err)
		}
		data = data[size:]
	}
	if err := send(data, false); err != nil {
		return fmt.Errorf("send last chunk: %w", err)
	}
	return nil
}
