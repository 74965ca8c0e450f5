#!/usr/bin/env bash
# Run the peer (a Flink local mini-cluster in this JVM): run.sh --bootstrap H:P --topic T ...
# (arguments: see PeerJob.java). PEER_FLAVOUR picks the build (per-table, the default, or
# multi-table; build.sh); JAVA_OPTS adds JVM options (e.g. -Xmx1g).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=$here/target/${PEER_FLAVOUR:-per-table}
if [ ! -f "$target/flink-starrocks-peer.jar" ]; then
    echo "peer: $target/flink-starrocks-peer.jar is missing: make peer" >&2
    exit 2
fi
# Flink on Java 17 needs these packages opened (as Flink's own config.yaml does).
opens=""
for p in java.lang java.lang.reflect java.net java.io java.nio sun.nio.ch java.text java.time \
    java.util java.util.concurrent java.util.concurrent.atomic java.util.concurrent.locks; do
    opens="$opens --add-opens=java.base/$p=ALL-UNNAMED"
done
exec java $opens ${JAVA_OPTS:-} -cp "$target/flink-starrocks-peer.jar:$target/lib/*" \
    io.txncdc.peer.PeerJob "$@"
