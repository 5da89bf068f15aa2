"""A CorTeX-protocol echo worker in Python (libzmq through pyzmq), for the interop test.

Usage: echo_worker.py VENTILATOR SINK SERVICE IDENTITY COUNT
It requests tasks, echoes each payload back to the sink unchanged, and exits after COUNT tasks.
"""
import sys
import time

import zmq

MESSAGE_SIZE = 100000


def main():
    ventilator, sink, service, identity, count = sys.argv[1:6]
    count = int(count)
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, identity.encode())
    dealer.setsockopt(zmq.RCVTIMEO, 10000)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(ventilator)
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(sink)
    done = 0
    deadline = time.time() + 60
    while done < count and time.time() < deadline:
        dealer.send(service.encode())
        frames = dealer.recv_multipart()
        taskid = frames[0]
        if taskid in (b"0", b"-1"):
            time.sleep(0.05)
            continue
        payload = b"".join(frames[1:])
        chunks = [payload[i:i + MESSAGE_SIZE] for i in range(0, len(payload), MESSAGE_SIZE)] or [b""]
        push.send_multipart([identity.encode(), service.encode(), taskid] + chunks)
        done += 1
    push.close()
    dealer.close()
    ctx.term()
    sys.exit(0 if done == count else 1)


if __name__ == "__main__":
    main()
