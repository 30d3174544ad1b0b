"""Reading logs for what the rules know, line by line, with memory flat in the log's size.

Logs come as they are: binary bytes, encodings other than UTF-8, CRLF ends, ANSI
colours, lines of several ranks interleaved, and sizes of many gigabytes. A file is
read in chunks; only the lines that contain an anchor (a word every line a rule can
match contains) are decoded and matched, so the cost is a few C-speed searches per
chunk plus the few lines that matter. A CANN plog (lines that start with ``[LEVEL]``)
is read for its ``[ERROR]`` lines only. A plain log larger than ``PLAIN_LIMIT`` is
read at its head and its tail, where a failure's lines are; its middle is only counted.

The supervisor feeds a run's output here as it is written (``feed``), so the
diagnosis is ready when the run ends; ``npulab diagnose`` scans files (``scan_path``).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zipfile
from typing import IO, Iterable

from workers.contract.events import RANK_PREFIX
from workers.diagnosis.rules import Rule, RuleBook, codes_in, default_rules

CHUNK_BYTES = 8 * 1024 * 1024
# A "line" longer than this (a binary file, a tensor printed whole) is cut into pieces.
MAX_LINE_BYTES = 64 * 1024
# Text kept of a matched line (evidence, the diagnosis' ``line``).
MAX_TEXT_CHARS = 500
# A plain log past this size is read at its head and its tail only.
PLAIN_LIMIT = 512 * 1024 * 1024
PLAIN_HEAD = 64 * 1024 * 1024
# Hits kept: the first few of each rule and rank are enough to rank them, and keep
# memory flat however often a log repeats the same error.
HITS_PER_RULE = 20
MAX_HITS = 5000

# A plog's line names its module and process: "[ERROR] RUNTIME(12345,python):2024-...".
# torch_npu's own "[ERROR] 2024-06-20-10:41:32 (PID:59450, ...) ERR00100" starts a run's
# log as often, and the lines of a run's log that follow it hold no "[ERROR]".
_PLOG_HEAD = re.compile(rb"^\s*\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\] [A-Za-z_]+\(\d+,")
# MindSpore's log lines look like a plog's (``[WARNING] ME(pid,...):... [mindspore/...]``)
# but a run's output that starts with one holds its traceback too: read it whole.
_MINDSPORE_HEAD = re.compile(rb"^[^\n]{0,200}\[mindspore/")
PLOG_ANCHORS = (b"[ERROR]",)
# Every line a rule can match contains one of these (tests/diagnosis checks each rule's
# samples against them): the words of errors, exceptions and tracebacks.
ANCHORS = (
    b"rror",
    b"RROR",
    b"ail",
    b"xception",
    b"Traceback",
    b'File "',
    b"imeout",
    b"imed out",
    b"times out",
    b"heartbeat",
    b"out of memory",
    b"Killed",
    b"verflow",
    b"ECC",
    # MindSpore's report blocks and its null-pointer checks (rules/mindspore.json).
    b"Call Stack",
    b"call stack",
    b"pointer[",
)
_ANCHOR_RES = [re.compile(re.escape(anchor)) for anchor in ANCHORS]
_PLOG_RES = [re.compile(re.escape(anchor)) for anchor in PLOG_ANCHORS]
# No look-behind here: a pattern that starts with a literal is searched for at C speed,
# one that starts with a look-behind is tried at every byte (40 times slower). The line's
# own extraction (``rules.CANN_CODE``) checks the boundaries.
_CANN_ANCHOR = re.compile(rb"E[A-Z0-9]\d{4}")
_TEXT_ANCHORS = tuple(anchor.decode() for anchor in ANCHORS)
_CANN_TEXT = re.compile(r"(?<![A-Za-z0-9_])E[A-Z0-9]\d{4}(?![0-9])")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_RANK_ID = re.compile(r"RankID:(\d+)\)")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure))(?::|$)")
_LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|^<frozen|/lib64/python\d")


class Hit:
    """One line a rule matched, with where it was."""

    __slots__ = ("code", "codes", "file", "frame", "line_no", "rank", "rule", "seq", "text")

    def __init__(
        self,
        rule: Rule,
        code: str | None,
        file: str,
        line_no: int,
        text: str,
        rank: int | None,
        seq: int,
        codes: list[str],
    ) -> None:
        self.rule = rule
        self.code = code
        self.file = file
        self.line_no = line_no
        self.text = text
        self.rank = rank
        self.seq = seq
        self.codes = codes
        # Where a user-code exception was raised: (file, line) of the innermost frame.
        self.frame: tuple[str, int] | None = None

    def evidence(self) -> dict:
        return {"file": self.file, "line_no": self.line_no, "text": self.text}

    def __repr__(self) -> str:
        return f"Hit({self.rule.id}, {self.code}, {self.file}:{self.line_no})"


def clean_line(text: str) -> str:
    """``text`` without ANSI colours, control bytes or line ends, cut to a readable size."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r\n")
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return text


class Scanner:
    """Matches lines against the rules and keeps the hits, bounded.

    ``library_roots``: directories whose files are not the user's own (the
    platform's runner package), beside site-packages and the standard library.
    ``tables``: code -> official text from the CANN installation (``cann_tables``).
    """

    def __init__(
        self,
        book: RuleBook | None = None,
        tables: dict[str, dict] | None = None,
        library_roots: Iterable[str] = (),
    ) -> None:
        self.book = book or default_rules()
        self.tables = tables or {}
        self.library_roots = tuple(root for root in library_roots if root)
        self.hits: list[Hit] = []
        self._per_rule: dict[tuple[str, int | None], int] = {}
        self._seq = 0
        # (file, rank) -> the innermost frame of the traceback being read, or None.
        self._tracebacks: dict[tuple[str, int | None], tuple[str, int] | None] = {}
        self.files: list[str] = []
        self.lines_read = 0
        self.bytes_read = 0

    # -- lines ---------------------------------------------------------------

    def feed(self, text: str, file: str, line_no: int) -> None:
        """One line of a log as it is written (the supervisor's relay)."""
        self.lines_read += 1
        if any(anchor in text for anchor in _TEXT_ANCHORS) or _CANN_TEXT.search(text):
            self._line(text, file, line_no)

    def _line(self, raw: str, file: str, line_no: int) -> None:
        if "\\n" in raw:
            # A log pasted as a JSON string (a server's error body): its lines are one.
            for piece in raw.split("\\n"):
                self._one_line(piece, file, line_no)
        else:
            self._one_line(raw, file, line_no)

    def _one_line(self, raw: str, file: str, line_no: int) -> None:
        text = clean_line(raw)
        if len(text) > MAX_LINE_BYTES:
            text = text[:MAX_LINE_BYTES]
        rank: int | None = None
        body = text
        prefix = RANK_PREFIX.match(text)
        if prefix:
            rank = int(prefix.group(1))
            body = text[prefix.end() :]
        else:
            rank_id = _RANK_ID.search(text)
            if rank_id:
                rank = int(rank_id.group(1))
        shown = text[:MAX_TEXT_CHARS]
        codes = codes_in(body)
        matched = self._python(body, file, line_no, rank, shown, codes)
        for code in codes:
            rule = self.book.for_code(code)
            if rule is None:
                continue
            if rule.id == "cann-E-unknown" and code in self.tables:
                rule = self._table_rule(code)
            self._keep(rule, code, file, line_no, shown, rank, codes)
            matched = True
        for rule, code in self.book.text_matches(body):
            self._keep(
                rule,
                code or rule.code or (codes[0] if codes else None),
                file,
                line_no,
                shown,
                rank,
                codes,
            )
            matched = True
        del matched

    def _python(
        self,
        body: str,
        file: str,
        line_no: int,
        rank: int | None,
        shown: str,
        codes: list[str],
    ) -> bool:
        """Follow tracebacks; an exception raised in the user's own file is a hit."""
        key = (file, rank)
        if body.startswith(_TRACEBACK):
            self._tracebacks[key] = None
            return False
        if key not in self._tracebacks:
            return False
        frame = _FRAME.match(body)
        if frame:
            self._tracebacks[key] = (frame.group(1), int(frame.group(2)))
            return False
        if not body or body[0].isspace():
            return False
        exception = _EXCEPTION.match(body)
        if exception is None:
            return False
        innermost = self._tracebacks.pop(key)
        rule = self.book.user_exception
        if (
            rule is None
            or innermost is None
            or not self.is_user_file(innermost[0])
            or codes
            or any(True for _ in self.book.text_matches(body))
        ):
            return False
        self._keep(rule, None, file, line_no, shown, rank, codes, frame=innermost)
        return True

    def is_user_file(self, path: str) -> bool:
        if _LIBRARY.search(path):
            return False
        return not any(path.startswith(root) for root in self.library_roots)

    def _table_rule(self, code: str) -> Rule:
        """A rule made from the installation's own error table, for a code no rule names."""
        entry = self.tables[code]
        rule_id = "cann-table-" + code
        if rule_id not in self.book.by_id:
            rule = Rule(
                {
                    "id": rule_id,
                    "match": {"code": code},
                    "role": "root",
                    "category": "unknown",
                    "blame": "stack",
                    "meaning": entry.get("title", "") + ": " + entry.get("message", ""),
                    "fix": entry.get("solution") or "See the CANN error-code reference.",
                    "source": "CANN installation: " + entry.get("file", ""),
                },
                "cann tables",
            )
            self.book.by_id[rule_id] = rule
        return self.book.by_id[rule_id]

    def _keep(
        self,
        rule: Rule,
        code: str | None,
        file: str,
        line_no: int,
        text: str,
        rank: int | None,
        codes: list[str],
        frame: tuple[str, int] | None = None,
    ) -> None:
        self._seq += 1
        key = (rule.id, rank)
        seen = self._per_rule.get(key, 0)
        if seen >= HITS_PER_RULE or len(self.hits) >= MAX_HITS:
            return
        self._per_rule[key] = seen + 1
        hit = Hit(rule, code, file, line_no, text, rank, self._seq, codes)
        hit.frame = frame
        self.hits.append(hit)

    # -- files ---------------------------------------------------------------

    def scan_path(self, path: str) -> None:
        """A log file, a directory of logs (plogs), or a support bundle (.tar.gz, .zip)."""
        if os.path.isdir(path):
            for name in sorted(_files_under(path)):
                self.scan_file(name)
        elif _is_archive(path):
            self.scan_archive(path)
        else:
            self.scan_file(path)

    def scan_file(self, path: str, name: str | None = None) -> None:
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                self.scan_stream(handle, name or path, size)
        except OSError:
            # Unreadable (gone, a socket, no permission): nothing to say about it.
            return

    def scan_archive(self, path: str) -> None:
        """Each member of a bundle, streamed out of the archive."""
        try:
            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as archive:
                    for info in archive.infolist():
                        if not info.is_dir():
                            with archive.open(info) as member:
                                self.scan_stream(member, f"{path}:{info.filename}", info.file_size)
                return
            with tarfile.open(path, "r:*") as archive:
                for info in archive:
                    if info.isfile():
                        member = archive.extractfile(info)
                        if member is not None:
                            self.scan_stream(member, f"{path}:{info.name}", info.size)
        except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
            return

    def scan_stream(self, handle: IO[bytes], name: str, size: int = 0) -> None:
        self.files.append(name)
        head = handle.read(CHUNK_BYTES)
        plog = bool(_PLOG_HEAD.match(head[:256])) and not _MINDSPORE_HEAD.match(head[:256])
        anchors = _PLOG_RES if plog else _ANCHOR_RES
        cann = None if plog else _CANN_ANCHOR
        skip_from = PLAIN_HEAD if (not plog and size > PLAIN_LIMIT) else -1
        skip_to = size - (PLAIN_LIMIT - PLAIN_HEAD)
        reader = _Chunks(handle, head, skip_from, skip_to)
        for chunk, lines_before in reader:
            self._chunk(chunk, lines_before, anchors, cann, name)
        self.bytes_read += reader.bytes_read

    def _chunk(
        self,
        chunk: bytes,
        lines_before: int,
        anchors: list[re.Pattern[bytes]],
        cann: re.Pattern[bytes] | None,
        name: str,
    ) -> None:
        starts = set()
        patterns = list(anchors) + ([cann] if cann is not None else [])
        for pattern in patterns:
            for match in pattern.finditer(chunk):
                starts.add(chunk.rfind(b"\n", 0, match.start()) + 1)
        position = 0
        line_no = lines_before + 1
        for start in sorted(starts):
            line_no += chunk.count(b"\n", position, start)
            position = start
            end = chunk.find(b"\n", start)
            raw = chunk[start : end if end >= 0 else len(chunk)]
            self._line(raw.decode("utf-8", errors="replace"), name, line_no)


class _Chunks:
    """Chunks of whole lines from a binary stream, and how many lines came before each.

    Between ``skip_from`` and ``skip_to`` (byte offsets; -1: never) lines are only
    counted, so a huge plain log's middle costs a read, not a scan.
    """

    def __init__(self, handle: IO[bytes], head: bytes, skip_from: int, skip_to: int) -> None:
        self.handle = handle
        self.head = head
        self.skip_from = skip_from
        self.skip_to = skip_to
        self.bytes_read = 0

    def __iter__(self):
        lines = 0
        carry = b""
        offset = 0  # of the start of carry + the next data, in the stream
        data = self.head
        while data:
            self.bytes_read += len(data)
            buffer = carry + data
            cut = buffer.rfind(b"\n") + 1
            if cut == 0 and len(buffer) > MAX_LINE_BYTES:
                cut = len(buffer)
            chunk, carry = buffer[:cut], buffer[cut:]
            skipping = self.skip_from >= 0 and self.skip_from <= offset < self.skip_to
            if chunk and not skipping:
                yield chunk, lines
            lines += chunk.count(b"\n")
            offset += len(chunk)
            data = self.handle.read(CHUNK_BYTES)
        if carry:
            yield carry, lines


def _files_under(directory: str) -> Iterable[str]:
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path


def _is_archive(path: str) -> bool:
    lowered = path.lower()
    return lowered.endswith((".tar.gz", ".tgz", ".tar", ".zip"))


def scan_text(text: str, name: str = "<text>", scanner: Scanner | None = None) -> Scanner:
    """Scan a string as if it were a file (tests, small inputs)."""
    scanner = scanner or Scanner()
    data = text.encode("utf-8")
    scanner.scan_stream(io.BytesIO(data), name, len(data))
    return scanner


__all__ = ["Hit", "Scanner", "clean_line", "scan_text"]
