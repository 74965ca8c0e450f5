"""Regenerate ``app/kafka_client_configs.py`` from the kafka-clients jar Spark's connector uses.

    .venv/bin/python -m devstack.kafka.client_configs [--check]

Runs ``ConsumerConfig.configNames()`` of the jar in ``jvm/lib/spark-kafka`` (a single-file Java
program, Java 11+), so the list of valid ``source.options.kafka.*`` keys follows the client
release instead of a hand list. ``--check`` exits 1 when the checked-in module differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "app" / "kafka_client_configs.py"
_JAVA = """
public class Names {
  public static void main(String[] a) {
    for (String n : new java.util.TreeSet<>(
        org.apache.kafka.clients.consumer.ConsumerConfig.configNames())) System.out.println(n);
  }
}
"""


def classpath() -> str:
    """The connector's jars plus pyspark's slf4j (kafka-clients logs through it)."""
    import pyspark

    jars = sorted((ROOT / "jvm" / "lib" / "spark-kafka").glob("*.jar"))
    slf4j = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    if not jars:
        msg = "jvm/lib/spark-kafka has no jars: run make setup"
        raise SystemExit(msg)
    return ":".join(str(p) for p in [*jars, *slf4j])


def client_version() -> str:
    """The kafka-clients release of the connector (from its jar's name)."""
    jar = next((ROOT / "jvm" / "lib" / "spark-kafka").glob("kafka-clients-*.jar"))
    return jar.stem.removeprefix("kafka-clients-")


def consumer_config_names() -> list[str]:
    """``ConsumerConfig.configNames()`` of that jar, sorted."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "Names.java"
        source.write_text(_JAVA)
        out = subprocess.run(  # noqa: S603 - java on our own generated file
            ["java", "-cp", classpath(), str(source)],  # noqa: S607 - the JDK on PATH
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def render(names: list[str], version: str) -> str:
    """The module's text."""
    body = "\n".join(f'        "{n}",' for n in names)
    return (
        '"""Kafka consumer settings the connector passes on (``source.options.kafka.*``).\n'
        "\n"
        f"Generated from kafka-clients {version} (``ConsumerConfig.configNames()``) by\n"
        "``python -m devstack.kafka.client_configs``; do not edit by hand.\n"
        '"""\n'
        "\n"
        f'KAFKA_CLIENTS_VERSION = "{version}"\n'
        "\n"
        "CONSUMER_CONFIGS = frozenset(\n"
        "    {\n"
        f"{body}\n"
        "    }\n"
        ")\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Write the module, or with ``--check`` compare it."""
    parser = argparse.ArgumentParser(prog="python -m devstack.kafka.client_configs")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render(consumer_config_names(), client_version())
    if args.check:
        same = MODULE.exists() and MODULE.read_text() == text
        print("up to date" if same else f"{MODULE} is stale: regenerate it")
        return 0 if same else 1
    MODULE.write_text(text)
    print(f"wrote {MODULE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
