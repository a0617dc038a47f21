"""Content-addressed, immutable dataset snapshots on local disk or GCS. Why: docs/internals.md."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import re
import time
import uuid
from typing import BinaryIO, Iterator, Optional, Sequence

from components.data.snapshot import missing_values as _missing
from components.errors import SnapshotError
from components.storage import Storage, storage_for

MANIFEST = "manifest.json"
DATA_DIR = "data"
DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_TMP_PREFIX = ".tmp-"
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class FileEntry:
    path: str      # relative to the source / the snapshot's data dir, '/'-separated
    size: int
    sha256: str
    rows: int      # data rows of a CSV file (header excluded); 0 for other files
    # When the file was rewritten (missing-value tokens emptied, a byte-order mark dropped): the source's sha256
    # and the cells emptied per column.
    source_sha256: str = ""
    emptied: dict[str, int] = dataclasses.field(default_factory=dict)
    dropped_bom: bool = False  # the source began with a UTF-8 byte-order mark, not copied


@dataclasses.dataclass(frozen=True)
class Manifest:
    digest: str
    source_uri: str
    created: str   # UTC, ISO 8601
    files: tuple[FileEntry, ...]
    uri: str       # the snapshot directory
    # The span directories (components/data/snapshot/spans.py) it holds, oldest first; empty for a flat source.
    spans: tuple[str, ...] = ()
    missing_values: tuple[str, ...] = ()  # cells equal to one of these were emptied

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def data_uri(self) -> str:
        return f"{self.uri}/{DATA_DIR}"

    def to_json(self) -> str:
        body = {"digest": self.digest, "source_uri": self.source_uri, "created": self.created,
                "rows": self.rows, "files": [dataclasses.asdict(f) for f in self.files],
                "missing_values": list(self.missing_values)}
        if self.spans:
            body["spans"] = list(self.spans)
        return json.dumps(body, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, uri: str) -> "Manifest":
        body = json.loads(text)
        return cls(digest=body["digest"], source_uri=body["source_uri"], created=body["created"],
                   files=tuple(FileEntry(**f) for f in body["files"]), uri=uri,
                   spans=tuple(body.get("spans", ())), missing_values=tuple(body.get("missing_values", ())))


def content_digest(files: list[FileEntry], missing_values: Sequence[str] = (), dropped_bom: bool = False) -> str:
    """Of the source files' bytes and, when tokens are emptied or a byte-order mark dropped, of that rewrite:
    what the snapshot holds."""
    listing = "".join(f"{f.sha256}  {f.path}\n" for f in sorted(files, key=lambda f: f.path))
    if missing_values:
        listing += f"missing_values {json.dumps(sorted(set(missing_values)))}\n"
    if dropped_bom:  # snapshots made before the mark was dropped kept it: not the same content
        listing += "utf8_bom dropped\n"
    return hashlib.sha256(listing.encode()).hexdigest()


def _hash_stream(stream: BinaryIO) -> tuple[str, int, int, bytes]:
    """(sha256, size, line count, the first bytes) of a stream, read in chunks."""
    h, size, newlines, last, head = hashlib.sha256(), 0, 0, b"", b""
    with stream:
        while chunk := stream.read(_CHUNK):
            head = head or chunk[:len(_missing.UTF8_BOM)]
            h.update(chunk)
            size += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    # A last line without a newline is still a line.
    lines = newlines + (1 if size and last != b"\n" else 0)
    return h.hexdigest(), size, lines, head


def _is_csv(path: str) -> bool:
    return path.lower().endswith(".csv")


def _rows(path: str, lines: int) -> int:
    return max(lines - 1, 0) if _is_csv(path) else 0


def fingerprint(source_uri: str, gcs_client=None) -> str:
    """Cheap change detector for the source (names, sizes, mtimes or generations): no data is read."""
    files = storage_for(source_uri, gcs_client).list()
    listing = "".join(f"{p} {size} {token}\n" for p, (size, token) in sorted(files.items()))
    return hashlib.sha256(f"{source_uri}\n{listing}".encode()).hexdigest()


def create(source_uri: str, root: str, gcs_client=None, spans: tuple[str, ...] = (),
           missing_values: Sequence[str] = (), leave_out: Sequence[str] = ()) -> Manifest:
    """Snapshot source_uri (only the given span directories, if any) into root; returns the existing
    snapshot if the bytes are already there.

    CSV cells equal to one of `missing_values` are stored empty, and a UTF-8 byte-order mark starting a CSV
    file is dropped (components/data/snapshot/missing_values.py).
    A file named in `leave_out` directly inside a span directory (its ready marker, spans.py) is not data.
    """
    missing_values = tuple(sorted({t for t in missing_values if t}))
    src, dst = storage_for(source_uri, gcs_client), storage_for(root, gcs_client)
    listing = [p for p in src.list() if not spans or (p.partition("/")[0] in spans
                                                     and p.partition("/")[2] not in leave_out)]
    if not listing:
        raise SnapshotError(f"snapshot source {source_uri!r} has no files (missing or empty directory?)")
    entries, with_bom = [], set()
    for path in listing:
        sha, size, lines, head = _hash_stream(src.open_read(path))
        entries.append(FileEntry(path, size, sha, _rows(path, lines)))
        if _is_csv(path) and head == _missing.UTF8_BOM:
            with_bom.add(path)
    digest = content_digest(entries, missing_values, bool(with_bom))

    existing = _read_manifest(dst, digest)
    if existing is not None:
        return existing

    tmp = f"{_TMP_PREFIX}{digest[:16]}-{uuid.uuid4().hex[:8]}"
    try:
        for i, entry in enumerate(entries):
            # Hash again while copying: the source may have changed since the first pass.
            target = f"{tmp}/{DATA_DIR}/{entry.path}"
            cleaned = ((missing_values and _is_csv(entry.path) or entry.path in with_bom)
                       and _missing.copy_cleaned(src, dst, entry.path, target, missing_values,
                                                   entry.path in with_bom))
            if cleaned:
                source_sha = cleaned.source_sha256
                if cleaned.changed:
                    entries[i] = dataclasses.replace(entry, sha256=cleaned.sha256, size=cleaned.size,
                                                     source_sha256=source_sha, emptied=cleaned.emptied,
                                                     dropped_bom=cleaned.dropped_bom)
            else:
                h = hashlib.sha256()
                dst.write(target, _tee(src.open_read(entry.path), h))
                source_sha = h.hexdigest()
            if source_sha != entry.sha256:
                raise SnapshotError(f"{source_uri}/{entry.path} changed while it was being snapshotted; retry")
        for entry in entries:
            landed, *_ = _hash_stream(dst.open_read(f"{tmp}/{DATA_DIR}/{entry.path}"))
            if landed != entry.sha256:
                raise SnapshotError(f"copy of {entry.path} in {root}/{tmp} does not match its source hash")
        manifest = Manifest(digest=digest, source_uri=source_uri, files=tuple(entries), spans=tuple(spans),
                            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            uri=f"{dst.uri}/{digest}", missing_values=missing_values)
        dst.write(f"{tmp}/{MANIFEST}", iter([manifest.to_json().encode()]))
        # Another run may have published the same bytes meanwhile; theirs is as good as ours.
        existing = _read_manifest(dst, digest)
        if existing is not None:
            return existing
        try:
            dst.publish(tmp, digest, MANIFEST)
        except OSError:  # lost the race to publish the same digest (rename onto a non-empty dir)
            existing = _read_manifest(dst, digest)
            if existing is None:
                raise
            return existing
    finally:
        dst.delete(tmp)
    return manifest


def _tee(stream: BinaryIO, h) -> Iterator[bytes]:
    with stream:
        while chunk := stream.read(_CHUNK):
            h.update(chunk)
            yield chunk


def _read_manifest(store: Storage, digest: str) -> Optional[Manifest]:
    path = f"{digest}/{MANIFEST}"
    if not store.exists(path):
        return None
    with store.open_read(path) as f:
        return Manifest.from_json(f.read().decode(), f"{store.uri}/{digest}")


def get(root: str, digest: str, verify: bool = True, gcs_client=None) -> Manifest:
    """The published snapshot `digest`; with verify, every file's bytes are checked against the manifest."""
    if not DIGEST_RE.match(digest):
        raise SnapshotError(f"{digest!r} is not a snapshot digest (64 lower-case hex characters)")
    store = storage_for(root, gcs_client)
    manifest = _read_manifest(store, digest)
    if manifest is None:
        raise SnapshotError(f"no snapshot {digest} in {root} (see `python -m pipeline snapshots list`)")
    if verify:
        for entry in manifest.files:
            path = f"{digest}/{DATA_DIR}/{entry.path}"
            if not store.exists(path):
                raise SnapshotError(f"snapshot {digest}: {entry.path} is missing from {manifest.data_uri}")
            sha, *_ = _hash_stream(store.open_read(path))
            if sha != entry.sha256:
                raise SnapshotError(f"snapshot {digest}: {entry.path} was modified after publishing "
                                    f"(sha256 {sha}, manifest says {entry.sha256})")
    return manifest


def list_snapshots(root: str, gcs_client=None) -> list[Manifest]:
    """Published snapshots (those with a manifest), oldest first."""
    store = storage_for(root, gcs_client)
    digests = {p.split("/", 1)[0] for p in store.list() if p.endswith(f"/{MANIFEST}") and p.count("/") == 1}
    manifests = [_read_manifest(store, d) for d in sorted(digests) if DIGEST_RE.match(d)]
    return sorted(manifests, key=lambda m: (m.created, m.digest))


def resolve_digest(root: str, prefix: str, gcs_client=None) -> str:
    """The one published digest starting with prefix (at least 8 hex characters)."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", prefix):
        raise SnapshotError(f"--snapshot {prefix!r}: expected a digest or a prefix of at least 8 hex characters")
    matches = [m.digest for m in list_snapshots(root, gcs_client) if m.digest.startswith(prefix)]
    if len(matches) != 1:
        what = "no snapshot" if not matches else f"{len(matches)} snapshots"
        raise SnapshotError(f"--snapshot {prefix}: {what} in {root} match (see `python -m pipeline snapshots list`)")
    return matches[0]


def csv_problems(manifest: Manifest, limit: int = 5, gcs_client=None) -> list[str]:
    """Structural faults that would make ExampleGen fail obscurely: no header, ragged rows, differing headers."""
    store = storage_for(manifest.uri, gcs_client)
    problems: list[str] = []
    header, header_file = None, None
    for entry in manifest.files:
        if not entry.path.lower().endswith(".csv"):
            continue
        with store.open_read(f"{DATA_DIR}/{entry.path}") as raw:
            reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
            try:
                first = next(reader, None)
                if first is None:
                    problems.append(f"{entry.path}: empty file, no header row")
                    continue
                if header is None:
                    header, header_file = first, entry.path
                elif first != header:
                    problems.append(f"{entry.path}: header {first} differs from {header_file}'s {header}")
                for row in reader:
                    if row and len(row) != len(first):
                        problems.append(f"{entry.path} line {reader.line_num}: {len(row)} fields, the header has "
                                        f"{len(first)} (truncated row or wrong delimiter?)")
                        if len(problems) >= limit:
                            return problems
            except (UnicodeDecodeError, csv.Error) as e:
                problems.append(f"{entry.path} line {reader.line_num}: not readable as UTF-8 CSV ({e})")
    return problems


def format_list(manifests: list[Manifest]) -> str:
    if not manifests:
        return "no snapshots"
    lines = [f"{'digest':<64}  {'rows':>8}  {'created':<20}  source"]
    lines += [f"{m.digest}  {m.rows:>8}  {m.created:<20}  {m.source_uri}" for m in manifests]
    return "\n".join(lines)
