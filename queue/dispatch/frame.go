package dispatch

/*
#cgo !windows pkg-config: libzmq
#include <zmq.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

// cq_frame is one frame being received, and what cq_recv reports of it: its size, whether
// more follow, and its connection's User-Id and Peer-Address properties (NULL where none).
typedef struct {
	zmq_msg_t msg;
	size_t size;
	int more;
	const char *uid;
	const char *addr;
} cq_frame;

// cq_recv initialises f's message and receives the next frame of sock into it (again after
// EINTR), reading the properties if props: one cgo call for what took seven.
static int cq_recv(void *sock, cq_frame *f, int flags, int props) {
	int n;
	f->uid = NULL;
	f->addr = NULL;
	zmq_msg_init(&f->msg);
	do {
		n = zmq_msg_recv(&f->msg, sock, flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return n;
	}
	f->size = zmq_msg_size(&f->msg);
	f->more = zmq_msg_more(&f->msg);
	if (props) {
		f->uid = zmq_msg_gets(&f->msg, "User-Id");
		f->addr = zmq_msg_gets(&f->msg, "Peer-Address");
	}
	return n;
}

// cq_close copies the frame's bytes to dst, if not NULL, and releases its message.
static void cq_close(cq_frame *f, void *dst) {
	if (dst != NULL) {
		memcpy(dst, zmq_msg_data(&f->msg), zmq_msg_size(&f->msg));
	}
	zmq_msg_close(&f->msg);
}
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
	// md are the connection's properties, when asked for and the frame carries them.
	md connMeta
}

// connMeta are the properties of a message's connection that the replica reads.
type connMeta struct {
	userID   string // the CURVE key ("" without CURVE)
	peerAddr string
	found    bool // some property was found
}

// cframe is the C side of a frame being received; one serves all the frames of a message.
type cframe = C.cq_frame

// recvFrame receives the next frame of sock, copying its bytes only if it has at most keep of
// them, and reading the connection's properties (User-Id, Peer-Address) if props. cf is
// scratch space, reused from frame to frame.
func recvFrame(sock *zmq.Socket, cf *cframe, flags zmq.Flag, keep int, props bool) (frame, error) {
	var wantProps C.int
	if props {
		wantProps = 1
	}
	n, err := C.cq_recv(socketHandle(sock), cf, C.int(flags), wantProps)
	if n < 0 {
		C.cq_close(cf, nil)
		if errno, ok := err.(syscall.Errno); ok {
			return frame{}, zmq.Errno(errno)
		}
		return frame{}, err
	}
	f := frame{size: int(cf.size), more: cf.more != 0}
	if cf.uid != nil {
		f.md.userID, f.md.found = C.GoString(cf.uid), true
	}
	if cf.addr != nil {
		f.md.peerAddr, f.md.found = C.GoString(cf.addr), true
	}
	var dst unsafe.Pointer
	if f.size <= keep {
		f.data = make([]byte, f.size)
		if f.size > 0 {
			dst = unsafe.Pointer(&f.data[0])
		}
	}
	C.cq_close(cf, dst)
	return f, nil
}

// socketHandle is the libzmq socket under sock. pebbe/zmq4 (v1.4.0, pinned in go.mod) keeps it
// in the first field of Socket and has no accessor; TestRecvLimitedNeverCopiesAnOversizedHeader
// uses it. A closed Socket holds nil there, which libzmq answers with ENOTSOCK.
func socketHandle(sock *zmq.Socket) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(sock))
}
