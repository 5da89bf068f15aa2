package dispatch

/*
#cgo !windows pkg-config: libzmq
#include <zmq.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"syscall"
	"unsafe"

	zmq "github.com/pebbe/zmq4"
)

// frame is one received frame. Its bytes are copied out of libzmq only when the caller wanted
// them: pebbe/zmq4's receives copy every frame whole, so a peer could make the replica hold a
// second copy of any frame libzmq let through (ZMQ_MAXMSGSIZE caps all frames of a socket
// alike, and the sink's must let large data frames in).
type frame struct {
	data []byte // nil unless kept
	size int
	more bool
	// md are the connection's properties asked for, when the frame carries them.
	md map[string]string
}

// recvFrame receives the next frame of sock, copying its bytes only if it has at most keep of
// them, and reading the properties named in props.
func recvFrame(sock *zmq.Socket, flags zmq.Flag, keep int, props ...string) (frame, error) {
	var msg C.zmq_msg_t
	C.zmq_msg_init(&msg)
	defer C.zmq_msg_close(&msg)
	handle := socketHandle(sock)
	for {
		n, err := C.zmq_msg_recv(&msg, handle, C.int(flags))
		if n >= 0 {
			break
		}
		if errno, ok := err.(syscall.Errno); !ok || errno != syscall.EINTR {
			if ok {
				return frame{}, zmq.Errno(errno)
			}
			return frame{}, err
		}
	}
	f := frame{size: int(C.zmq_msg_size(&msg)), more: C.zmq_msg_more(&msg) != 0}
	if f.size <= keep {
		f.data = make([]byte, f.size)
		if f.size > 0 {
			C.memcpy(unsafe.Pointer(&f.data[0]), C.zmq_msg_data(&msg), C.size_t(f.size))
		}
	}
	for _, p := range props {
		cp := C.CString(p)
		if v := C.zmq_msg_gets(&msg, cp); v != nil {
			if f.md == nil {
				f.md = map[string]string{}
			}
			f.md[p] = C.GoString(v)
		}
		C.free(unsafe.Pointer(cp))
	}
	return f, nil
}

// socketHandle is the libzmq socket under sock. pebbe/zmq4 (v1.4.0, pinned in go.mod) keeps it
// in the first field of Socket and has no accessor; TestRecvLimitedNeverCopiesAnOversizedHeader
// uses it. A closed Socket holds nil there, which libzmq answers with ENOTSOCK.
func socketHandle(sock *zmq.Socket) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(sock))
}
