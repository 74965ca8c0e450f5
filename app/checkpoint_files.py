"""Files the pipeline keeps next to Spark's checkpoint, through Hadoop's file system (driver)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Suffix of a file being written (:meth:`CheckpointFiles.write_json`).
_TMP = ".tmp"


class CheckpointFiles:
    """The checkpoint folder through Hadoop's file system (local, HDFS, S3A alike)."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm: Any = spark._jvm
        self._jvm = jvm
        self._root = jvm.org.apache.hadoop.fs.Path(location)
        self._fs = self._root.getFileSystem(spark._jsc.hadoopConfiguration())

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._root, name)

    def has_offsets(self) -> bool:
        """Whether Spark has planned a micro-batch in this checkpoint (its offset log)."""
        offsets = self._path("offsets")
        return bool(self._fs.exists(offsets) and len(self._fs.listStatus(offsets)) > 0)

    def exists(self, name: str) -> bool:
        """Whether the file ``name`` is there, readable or not."""
        return self._where(name) is not None

    def read_json(self, name: str) -> Any:
        """The JSON file ``name`` next to the checkpoint; ``None`` when missing or unreadable."""
        path = self._where(name)
        if path is None:
            return None
        stream = self._fs.open(path)
        try:
            data = bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError:
            log.warning("ignoring unreadable %s in the checkpoint", name)
            return None

    def write_json(self, name: str, value: Any) -> None:
        """Write (or replace) the JSON file ``name`` next to the checkpoint, atomically.

        A crash leaves the old file or the new one, never a torn one: written whole under a
        temporary name, then moved over the old file. Hadoop's rename does not replace, so the
        old file goes first; a crash between the two leaves the new one under its temporary
        name, which :meth:`read_json` then reads.
        """
        target, tmp = self._path(name), self._path(name + _TMP)
        stream = self._fs.create(tmp, True)
        try:
            stream.write(bytearray(json.dumps(value, sort_keys=True).encode("utf-8")))
        finally:
            stream.close()
        self._fs.delete(target, False)
        if not self._fs.rename(tmp, target):
            msg = f"could not move {tmp} to {target} in the checkpoint"
            raise OSError(msg)

    def delete(self, name: str) -> bool:
        """Remove the file ``name`` (with its checksum file); whether it was there."""
        gone = bool(self._fs.delete(self._path(name), False))
        return bool(self._fs.delete(self._path(name + _TMP), False)) or gone

    def _where(self, name: str) -> Any:
        """The path holding ``name``'s content: the file, else its completed temporary copy."""
        for path in (self._path(name), self._path(name + _TMP)):
            if self._fs.exists(path):
                return path
        return None

    def batch_ids(self, folder: str) -> list[int]:
        """The batch ids of Spark's log ``folder`` (``offsets``, ``commits``), ascending."""
        path = self._path(folder)
        if not self._fs.exists(path):
            return []
        names = (str(status.getPath().getName()) for status in self._fs.listStatus(path))
        return sorted(int(name) for name in names if name.isdigit())
