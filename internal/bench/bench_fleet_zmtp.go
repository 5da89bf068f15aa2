package bench

import (
	"bufio"
	"context"
	zbin "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// fleetDealer is a ZMTP 3 DEALER (NULL mechanism) on one TCP connection: what the fleet bench
// simulates each worker with, since a libzmq socket takes two file descriptors (its connection
// and its mailbox) and a fleet of ten thousand would not fit one process's limit. It answers the
// replica's heartbeat PINGs while it waits for a reply.
type fleetDealer struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// dialDealer connects to a tcp:// endpoint as a DEALER with identity name.
func dialDealer(ctx context.Context, endpoint, name string) (*fleetDealer, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", strings.TrimPrefix(endpoint, "tcp://"))
	if err != nil {
		return nil, err
	}
	d := &fleetDealer{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), w: bufio.NewWriterSize(conn, 4<<10)}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := d.handshake(name); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zmtp handshake: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return d, nil
}

func (d *fleetDealer) handshake(name string) error {
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10], greeting[11] = 0xff, 0x7f, 3, 0
	copy(greeting[12:], "NULL")
	if _, err := d.w.Write(greeting); err != nil {
		return err
	}
	var ready []byte
	ready = append(ready, 5)
	ready = append(ready, "READY"...)
	for _, p := range [][2]string{{"Socket-Type", "DEALER"}, {"Identity", name}} {
		ready = append(ready, byte(len(p[0])))
		ready = append(ready, p[0]...)
		ready = zbin.BigEndian.AppendUint32(ready, uint32(len(p[1])))
		ready = append(ready, p[1]...)
	}
	d.writeFrame(0x04, ready)
	if err := d.w.Flush(); err != nil {
		return err
	}
	peer := make([]byte, 64)
	if _, err := io.ReadFull(d.r, peer); err != nil {
		return err
	}
	if peer[0] != 0xff || peer[9] != 0x7f || peer[10] < 3 {
		return errors.New("not a ZMTP 3 peer")
	}
	flags, body, err := d.readFrame()
	if err != nil {
		return err
	}
	if flags&0x04 == 0 || len(body) < 6 || string(body[1:6]) != "READY" {
		return fmt.Errorf("expected READY, got %q", body)
	}
	return nil
}

// writeFrame buffers one frame (flags: 0x01 more, 0x04 command).
func (d *fleetDealer) writeFrame(flags byte, body []byte) {
	if len(body) > 255 {
		_ = d.w.WriteByte(flags | 0x02)
		_ = zbin.Write(d.w, zbin.BigEndian, uint64(len(body)))
	} else {
		_ = d.w.WriteByte(flags)
		_ = d.w.WriteByte(byte(len(body)))
	}
	_, _ = d.w.Write(body)
}

func (d *fleetDealer) readFrame() (flags byte, body []byte, err error) {
	if flags, err = d.r.ReadByte(); err != nil {
		return 0, nil, err
	}
	var size uint64
	if flags&0x02 != 0 {
		var b [8]byte
		if _, err := io.ReadFull(d.r, b[:]); err != nil {
			return 0, nil, err
		}
		size = zbin.BigEndian.Uint64(b[:])
	} else {
		b, err := d.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		size = uint64(b)
	}
	if size > 256<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", size)
	}
	body = make([]byte, size)
	_, err = io.ReadFull(d.r, body)
	return flags, body, err
}

// send sends a one-frame message.
func (d *fleetDealer) send(frame []byte) error {
	d.writeFrame(0, frame)
	return d.w.Flush()
}

// recv reads the next message, answering PINGs, within timeout (os.ErrDeadlineExceeded).
func (d *fleetDealer) recv(timeout time.Duration) ([][]byte, error) {
	_ = d.conn.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = d.conn.SetReadDeadline(time.Time{}) }()
	var msg [][]byte
	for {
		flags, body, err := d.readFrame()
		if err != nil {
			return nil, err
		}
		if flags&0x04 != 0 {
			// PING: size-prefixed name, TTL (2 bytes), context; PONG echoes the context.
			if len(body) >= 7 && string(body[1:5]) == "PING" {
				pong := append([]byte{4}, "PONG"...)
				pong = append(pong, body[7:]...)
				d.writeFrame(0x04, pong)
				if err := d.w.Flush(); err != nil {
					return nil, err
				}
			}
			continue
		}
		msg = append(msg, body)
		if flags&0x01 == 0 {
			return msg, nil
		}
	}
}
