"""A TCP gate in front of a server, to take it away from its clients and give it back.

Open, the gate forwards each connection to the server. Closed, it drops every connection: those
open (a client's pooled keep-alive connection would otherwise go on working) and each new one
the moment it is accepted, as clients see a server that went away; it counts the new ones, so a
test knows a client tried while it was closed. Silent, it drops those open too, but holds each
new one without a word, as a server that took a request and never answers: a client without a
timeout waits forever.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class TcpGate:
    """Forwards 127.0.0.1:<port> to `target` while open."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._live: list[socket.socket] = []
        self.dropped = 0  # connections accepted, and dropped, while closed
        self._silent = False
        self._held: list[socket.socket] = []  # accepted while silent, never answered
        self._acceptor = threading.Thread(target=self._accept, name="tcp-gate", daemon=True)
        self._acceptor.start()

    def close(self) -> None:
        """Drop every connection, and each new one, until `open`."""
        self._open.clear()
        with self._lock:
            live, self._live = self._live, []
        for sock in live:
            _hang_up(sock)

    def silence(self) -> None:
        """Drop every connection, and hold each new one unanswered, until `open`."""
        self._silent = True
        self.close()

    @property
    def held(self) -> int:
        """How many connections were held unanswered."""
        return len(self._held)

    def open(self) -> None:
        """Forward new connections again (those held stay unanswered)."""
        self._silent = False
        self._open.set()

    def stop(self) -> None:
        self._stopped.set()
        self.close()
        self._acceptor.join(timeout=10)
        self._listener.close()
        for sock in self._held:
            _hang_up(sock)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            if not self._open.is_set() and self._silent:
                self._held.append(client)
                continue
            if not self._open.is_set():
                self.dropped += 1
                _hang_up(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                _hang_up(client)
                continue
            for sock in (client, server):
                sock.settimeout(None)  # a pooled connection may idle for long
            with self._lock:
                self._live += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    _hang_up(sink)


def _hang_up(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextlib.contextmanager
def gate_to(target: tuple[str, int]) -> Iterator[TcpGate]:
    """A gate to `target`, stopped afterwards."""
    gate = TcpGate(target)
    try:
        yield gate
    finally:
        gate.stop()
