#!/usr/bin/env bash
# `make peer`: package the Flink + StarRocks-connector peer (docs/peer.md):
# target/flink-starrocks-peer.jar and its runtime classpath target/lib/.
#
# flink-connector-starrocks 1.2.15_flink-1.20, the first release with multi-table transaction
# mode, is not on Maven Central as this project's machines reach it. The build needs it in a
# Maven repository Maven can use (MVN="mvn -Dmaven.repo.local=..." or settings.xml); without
# it this stops with that message instead of a Maven stack.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MVN=${MVN:-mvn}
artifact=com.starrocks:flink-connector-starrocks:1.2.15_flink-1.20

if ! $MVN -q -B dependency:get -Dartifact=$artifact -Dtransitive=false >/dev/null 2>&1; then
    echo "peer: $artifact cannot be resolved (it is not on Maven Central); make it available" \
         "in a Maven repository this machine can reach, then run make peer again" >&2
    exit 2
fi
rm -rf "$here/target/lib"
$MVN -q -B -f "$here/pom.xml" package
echo "peer: built $here/target/flink-starrocks-peer.jar (+ target/lib/)"
