"""Files the pipeline keeps next to Spark's checkpoint, through Hadoop's file system (driver)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


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
        return bool(self._fs.exists(self._path(name)))

    def read_json(self, name: str) -> Any:
        """The JSON file ``name`` next to the checkpoint; ``None`` when missing or unreadable."""
        path = self._path(name)
        if not self._fs.exists(path):
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
        """Write (or replace) the JSON file ``name`` next to the checkpoint."""
        stream = self._fs.create(self._path(name), True)
        try:
            stream.write(bytearray(json.dumps(value, sort_keys=True).encode("utf-8")))
        finally:
            stream.close()

    def delete(self, name: str) -> bool:
        """Remove the file ``name`` (with its checksum file); whether it was there."""
        return bool(self._fs.delete(self._path(name), False))

    def batch_ids(self, folder: str) -> list[int]:
        """The batch ids of Spark's log ``folder`` (``offsets``, ``commits``), ascending."""
        path = self._path(folder)
        if not self._fs.exists(path):
            return []
        names = (str(status.getPath().getName()) for status in self._fs.listStatus(path))
        return sorted(int(name) for name in names if name.isdigit())
