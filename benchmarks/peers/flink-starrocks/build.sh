#!/usr/bin/env bash
# `make peer`: package the Flink + StarRocks-connector peer (docs/peer.md), one flavour per
# argument (default: per-table), each into target/<flavour>/ (flink-starrocks-peer.jar + lib/).
#
# per-table: connector 1.2.10_flink-1.19, the newest on Maven Central; no multi-table
# transactions. multi-table: connector 1.2.15_flink-1.20, the first release with multi-table
# transaction mode, which is not on Maven Central as this project's machines reach it: its build
# needs it in a Maven repository Maven can use (MVN="mvn -Dmaven.repo.local=..." or
# settings.xml) and stops with that message otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MVN=${MVN:-mvn}
for flavour in "${@:-per-table}"; do
    case $flavour in
        per-table) artifact=com.starrocks:flink-connector-starrocks:1.2.10_flink-1.19 ;;
        multi-table) artifact=com.starrocks:flink-connector-starrocks:1.2.15_flink-1.20 ;;
        *) echo "peer: unknown flavour '$flavour' (per-table or multi-table)" >&2; exit 2 ;;
    esac
    if ! $MVN -q -B dependency:get -Dartifact=$artifact -Dtransitive=false >/dev/null 2>&1; then
        echo "peer: $artifact cannot be resolved (the $flavour flavour needs it; 1.2.15 is not" \
             "on Maven Central); make it available in a Maven repository this machine can" \
             "reach, then run make peer again" >&2
        exit 2
    fi
    rm -rf "$here/target/$flavour/lib"
    $MVN -q -B -f "$here/pom.xml" -P "$flavour" package
    echo "peer: built $here/target/$flavour/flink-starrocks-peer.jar (+ lib/)"
done
