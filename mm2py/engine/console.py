"""The operator's terminal shows mm2py's own lines: Spark's logs go to a file, JVM chatter is dropped.

The Spark driver JVM (and the Python workers it forks) write to the stderr they inherit. While
the JVM starts, ``jvm_output`` puts a pipe there; a thread forwards what arrives to the real
stderr, except the JVM's and Spark's start-up chatter (``CHATTER``) and, once the process is
stopping, everything (workers and the JVM dying under a signal print tracebacks that say
nothing about the data). Spark's own log4j output goes to ``spark.log`` in the given folder
(``log4j2_options``), WARN and above. A Python traceback a worker prints (a streaming source
runner that could not connect back to a loaded JVM, say: Spark fails the query and the flow
restarts it) goes to ``spark.log`` as well; the terminal gets one line naming its error
(``Tracebacks``).

py4j reports a command the JVM did not answer with ``logging.exception`` on the root logger;
``divert_py4j`` sends those records to ``spark.log`` too (a JVM that ends under a signal sent to
the whole process group leaves one per pending command).

Invariants: nothing mm2py logs itself passes through the filter (the driver's Python writes
to the real stderr); a line is dropped only when it matches ``CHATTER`` or arrives after
``stopping()``; a traceback's lines leave the terminal only when they are written to the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

CHATTER = re.compile(
    r"WARNING: Using incubator modules: .*"
    r"|Using Spark's default log4j profile: .*"
    r"|Setting default log level to .*"
    r"|To adjust logging level use sc\.setLogLevel.*"
    r"|.* WARN NativeCodeLoader: .*"
)

_LOG4J2 = """\
# mm2py: Spark's driver logs go to a file; the terminal shows mm2py's own lines.
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
"""


def log4j2_options(folder: str | Path) -> tuple[str, Path]:
    """JVM options sending Spark's log4j output to ``folder/spark.log``, and that file's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "spark.log"
    config = folder / "log4j2.properties"
    config.write_text(_LOG4J2.format(path=log))
    return f"-Dlog4j2.configurationFile=file:{config}", log


def keep(line: str, stopping: bool) -> bool:
    """Whether a line the JVM or a worker wrote reaches the terminal."""
    return not stopping and not CHATTER.fullmatch(line.rstrip("\r\n"))


_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


class Tracebacks:
    """Splits Python tracebacks out of a stream of lines; pure, fed one line at a time.

    A block starts at ``Traceback (most recent call last):`` (or at the line chaining a second
    traceback to a first) and runs over indented, blank and chaining lines up to the first
    other line, the exception itself, which ends it. ``feed`` returns the lines that stay in the
    stream (none while a block is open) and, once a block ends, the block; a chained traceback
    is two blocks; ``close`` returns a block the stream's end cut short. A message continuing
    over more lines after the exception's first line stays in the stream.
    """

    def __init__(self) -> None:
        self._block: list[str] | None = None

    def feed(self, line: str) -> tuple[list[str], list[str] | None]:
        if self._block is None:
            if line.startswith((_TRACEBACK, *_CHAINED)):
                self._block = [line]
                return [], None
            return [line], None
        self._block.append(line)
        if line[:1].isspace() or not line.strip() or line.startswith((_TRACEBACK, *_CHAINED)):
            return [], None
        block, self._block = self._block, None
        return [], block

    def close(self) -> list[str] | None:
        """The block still open when the stream ended (a process that died while printing it)."""
        block, self._block = self._block, None
        return block


class JvmOutput:
    """Forwards the JVM's stderr to ours, line by line, through ``keep``.

    With ``tracebacks_to`` (the ``spark.log`` file) a worker's Python traceback is appended there
    and the terminal gets one line naming its exception; without it the traceback is forwarded.
    """

    def __init__(self, tracebacks_to: Path | None = None) -> None:
        self._stopping = threading.Event()
        self._file = tracebacks_to

    def stopping(self) -> None:
        """From now on the JVM's and workers' output is dropped (a shutdown is under way)."""
        self._stopping.set()

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """While the block runs, processes started inherit a stderr that this object filters."""
        try:
            sys.stderr.flush()
            real = os.dup(2)
        except (OSError, ValueError):
            yield  # no real stderr (a test harness): nothing to filter
            return
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        thread = threading.Thread(target=self._forward, args=(read_end, real), name="mm2py-jvm-output",
                                  daemon=True)
        thread.start()
        try:
            yield
        finally:
            os.dup2(real, 2)  # our own writes go straight to the terminal again

    def _forward(self, read_end: int, real: int) -> None:
        tracebacks = Tracebacks()
        with os.fdopen(read_end, "rb") as pipe, os.fdopen(real, "wb", buffering=0) as out:
            for raw in pipe:
                text = raw.decode("utf-8", "replace")
                lines, block = tracebacks.feed(text) if self._file is not None else ([text], None)
                if block is not None and not self._stopping.is_set():
                    self._divert(block)
                for line in lines:
                    if keep(line, self._stopping.is_set()):
                        with contextlib.suppress(OSError):
                            out.write(line.encode())
            if (block := tracebacks.close()) is not None and not self._stopping.is_set():
                self._divert(block)  # cut short: kept in spark.log, not dropped

    def _divert(self, block: list[str]) -> None:
        assert self._file is not None
        with contextlib.suppress(OSError), self._file.open("a", encoding="utf-8") as spark_log:
            spark_log.write("".join(block))
        log.warning("a Spark Python process printed a traceback; Spark reports the failure of its task or "
                    "query, which mm2py retries or names", error=block[-1].strip()[:300], traceback=str(self._file))


class _Py4jToFile(logging.Filter):
    """Drops root-logger records emitted from py4j's modules after writing them to a file."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self._handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}py4j{os.sep}" not in record.pathname:
            return True
        self._handler.handle(record)
        return False


def divert_py4j(log: Path) -> None:
    """From now on py4j's root-logger records go to ``log``, not the terminal."""
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s py4j: %(message)s"))
    logging.getLogger().addFilter(_Py4jToFile(handler))
