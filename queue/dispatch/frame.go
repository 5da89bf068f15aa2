package dispatch

/*
#cgo !windows pkg-config: libzmq
#include <zmq.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

// cq_recv initialises msg and receives the next frame of sock into it (again after EINTR),
// reporting its size and whether more follow, and, if props, the User-Id and Peer-Address
// properties of its connection (NULL where there are none): one cgo call for what took seven.
static int cq_recv(void *sock, zmq_msg_t *msg, int flags, int props, size_t *size, int *more,
		const char **uid, const char **addr) {
	int n;
	zmq_msg_init(msg);
	do {
		n = zmq_msg_recv(msg, sock, flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return n;
	}
	*size = zmq_msg_size(msg);
	*more = zmq_msg_more(msg);
	if (props) {
		*uid = zmq_msg_gets(msg, "User-Id");
		*addr = zmq_msg_gets(msg, "Peer-Address");
	}
	return n;
}

// cq_close copies the frame's bytes to dst, if not NULL, and releases msg.
static void cq_close(zmq_msg_t *msg, void *dst) {
	if (dst != NULL) {
		memcpy(dst, zmq_msg_data(msg), zmq_msg_size(msg));
	}
	zmq_msg_close(msg);
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

// recvFrame receives the next frame of sock, copying its bytes only if it has at most keep of
// them, and reading the connection's properties (User-Id, Peer-Address) if props.
func recvFrame(sock *zmq.Socket, flags zmq.Flag, keep int, props bool) (frame, error) {
	var msg C.zmq_msg_t
	var size C.size_t
	var more, wantProps C.int
	var uid, addr *C.char
	if props {
		wantProps = 1
	}
	n, err := C.cq_recv(socketHandle(sock), &msg, C.int(flags), wantProps, &size, &more, &uid, &addr)
	if n < 0 {
		C.cq_close(&msg, nil)
		if errno, ok := err.(syscall.Errno); ok {
			return frame{}, zmq.Errno(errno)
		}
		return frame{}, err
	}
	f := frame{size: int(size), more: more != 0}
	if uid != nil {
		f.md.userID, f.md.found = C.GoString(uid), true
	}
	if addr != nil {
		f.md.peerAddr, f.md.found = C.GoString(addr), true
	}
	var dst unsafe.Pointer
	if f.size <= keep {
		f.data = make([]byte, f.size)
		if f.size > 0 {
			dst = unsafe.Pointer(&f.data[0])
		}
	}
	C.cq_close(&msg, dst)
	return f, nil
}

// socketHandle is the libzmq socket under sock. pebbe/zmq4 (v1.4.0, pinned in go.mod) keeps it
// in the first field of Socket and has no accessor; TestRecvLimitedNeverCopiesAnOversizedHeader
// uses it. A closed Socket holds nil there, which libzmq answers with ENOTSOCK.
func socketHandle(sock *zmq.Socket) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(sock))
}
