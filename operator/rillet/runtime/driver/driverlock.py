"""One driver at a time per checkpoint: an exclusive lock that is freed when its holder dies.

Two drivers on one checkpoint would both plan batches into its offset log: one of them fails
with Spark's "concurrent update" error at best, and both write the same records. So a driver
whose checkpoint is a local path (a `rillet run` directory, an App's volume) locks
`<checkpoint>/driver.lock` before it starts a query, and holds it until it ends.

The driver's JVM holds the lock (a java.nio FileLock, an fcntl lock), not its Python process:
every checkpoint write comes from the JVM, and a JVM outlives a SIGKILLed Python process by
the moment it takes to see its parent gone, possibly planning one more batch. On a local disk
the kernel frees the lock when the JVM's process ends, however it ends (on NFS the server
frees it, once the client's lease lapses if the client vanished): this is what lets a warm
standby (`runtime.driver.warmup`) take over in seconds.

On Kubernetes a driver pod finds the lock held only while the pod before it still runs on the
node (force-deleted, its containers not yet killed): it waits for that JVM rather than write
beside it. A checkpoint on an object store (s3a://, gs://...) has no such lock: it is not
locked, and the Kubernetes objects keep one driver per App there (a StatefulSet of one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from py4j.protocol import Py4JError, Py4JJavaError

if TYPE_CHECKING:  # pyspark only at run time, from inside a running driver
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LOCK_FILE = "driver.lock"
POLL_SECONDS = 0.1


def _no_locks(error: Py4JJavaError) -> bool:
    """Whether tryLock failed with ENOLCK: the filesystem takes no locks (NFSv3 without its
    lock daemon), not a transient error or a bug."""
    java = error.java_exception
    return str(java.getClass().getName()) == "java.io.IOException" and (
        "No locks available" in str(java.getMessage())
    )


def local_directory(checkpoint_location: str) -> Path | None:
    """The checkpoint's directory when it is a local path (or file: URL), else None."""
    url = urlsplit(checkpoint_location)
    if url.scheme == "file":
        return Path(unquote(url.path))
    return Path(checkpoint_location) if url.scheme == "" else None


class DriverLock:
    """The lock of one checkpoint directory, taken by this driver's JVM."""

    def __init__(self, spark: SparkSession, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory.absolute() / LOCK_FILE  # the JVM resolves paths on its own
        jvm = spark.sparkContext._jvm  # java.nio's FileLock: only reachable through py4j
        assert jvm is not None
        self._channel: Any = jvm.java.io.RandomAccessFile(str(self.path), "rw").getChannel()
        self._lock: Any = None
        self.unlocked = False  # the filesystem takes no locks: going on without
        self._seen_held = False

    def try_acquire(self) -> bool:
        """Take the lock if it is free; whether this driver holds it (or may go on without)."""
        if self._lock is None and not self.unlocked:
            try:
                self._lock = self._channel.tryLock()  # None while another process holds it
            except Py4JJavaError as error:
                if self._seen_held:  # a network volume's hiccup: the holder is still there
                    log.debug("locking the checkpoint failed, trying again: %s", error)
                    return False
                if not _no_locks(error):
                    raise
                # Refusing to start would stop every App on such a volume, and a driver alone
                # on its checkpoint needs no lock. Only at the first try: a driver that saw the
                # lock held never goes on without it.
                log.warning(
                    "the checkpoint's filesystem takes no locks (%s): running unlocked, with "
                    "nothing to keep a second driver off this checkpoint",
                    error.java_exception.getMessage(),
                )
                self.unlocked = True
                return True
            if self._lock is None:
                self._seen_held = True
            else:
                # Only a name for whoever waits: the lock is the JVM's, not this text.
                self.path.write_text(
                    f"pid {os.getpid()} on {socket.gethostname()}\n", encoding="utf-8"
                )
        return self._lock is not None or self.unlocked

    def acquire(self, stop: threading.Event) -> bool:
        """Wait for the lock until it is taken (True) or `stop` is set (False, even when the
        lock came free at the same moment)."""
        while not stop.is_set():
            if self.try_acquire():
                return True
            stop.wait(POLL_SECONDS)
        return False

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it (empty if unknown)."""
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def close(self) -> None:
        """Release the lock (closing the channel releases it; a JVM already gone released it)."""
        self._lock = None
        with contextlib.suppress(Py4JError):
            self._channel.close()
