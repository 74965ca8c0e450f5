#!/usr/bin/env bash
# The supported way to submit the pipeline:
#   ./spark-submit.sh --config conf/local.yaml [--set key=value ...]
# Extra spark-submit options go in SPARK_ARGS, e.g. SPARK_ARGS="--master spark://m:7077".
#
# It sets the Python for driver and executors, ships the project's packages to executors
# (--py-files), and adds Spark's Kafka connector: the jars `make setup` resolved into
# jvm/lib/spark-kafka (--jars) when they are there, else --packages (Spark resolves them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

fail() {
  echo "spark-submit.sh: $*" >&2
  exit 2
}

PYTHON="${PYSPARK_PYTHON:-$here/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON="$(command -v python3 || true)"
# find_spec locates a package without importing it (an import costs ~0.2 s at start).
[[ -n "$PYTHON" ]] && "$PYTHON" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("pyspark", "yaml")))' 2>/dev/null ||
  fail "${PYTHON:-python3} has no PySpark: run 'make setup' (it installs the project into" \
    ".venv), or set PYSPARK_PYTHON to a Python that has the project's requirements"
export PYSPARK_PYTHON="$PYTHON"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYTHON}"

# What only reads the settings (help, --check-config, --get) needs no Spark: answered here,
# without a JVM's start-up and its log lines in a script's output.
for arg in "$@"; do
  case "$arg" in
    -h | --help | --check-config | --get | --get=*) exec "$PYTHON" "$here/app/main.py" "$@" ;;
  esac
done

SPARK_SUBMIT="${SPARK_SUBMIT:-}"
if [[ -z "$SPARK_SUBMIT" ]]; then
  if [[ -x "$(dirname "$PYTHON")/spark-submit" ]]; then
    SPARK_SUBMIT="$(dirname "$PYTHON")/spark-submit"
  else
    SPARK_SUBMIT="$(command -v spark-submit || true)"
    [[ -n "$SPARK_SUBMIT" ]] ||
      fail "no spark-submit beside $PYTHON nor on PATH: set SPARK_SUBMIT to Spark's" \
        "bin/spark-submit"
  fi
fi

# Validate the settings before Spark starts: one clear line on error, exit 2.
"$PYTHON" "$here/app/main.py" "$@" --check-config >/dev/null

extra=()
connector_jars=("$here"/jvm/lib/spark-kafka/*.jar)
if [[ -e "${connector_jars[0]}" ]]; then
  extra+=(--jars "$(IFS=,; echo "${connector_jars[*]}")")
else
  spark_version="$("$PYTHON" -c 'import pyspark; print(pyspark.__version__)')"
  scala="${SCALA_BINARY_VERSION:-2.13}"
  extra+=(--packages "org.apache.spark:spark-sql-kafka-0-10_${scala}:${spark_version}")
fi

# Executors import the project: ship it as a zip unless they have it installed.
# One zip per submission: pipelines started side by side must not rewrite each other's file
# while their workers read it. Day-old ones (and day-old Python launchers, below) are swept.
mkdir -p "$here/build"
find "$here/build" \( -name 'cdc-pyfiles-*.zip' -o -name 'cdc-python-*' \) -mmin +1440 \
  -delete 2>/dev/null || true
zip_path="$(mktemp "$here/build/cdc-pyfiles-XXXXXXXX.zip")"
(cd "$here" && "$PYTHON" - "$zip_path" <<'PY'
import pathlib, sys, zipfile
# Bytecode in the zip: executors' Python workers would otherwise compile the whole project
# from source on every start (a third of the first batch's worker time in the profile).
with zipfile.PyZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED, optimize=0) as z:
    for pkg in ("app", "assembler", "sinks", "common"):
        z.writepy(pkg)
        for f in pathlib.Path(pkg).rglob("*"):
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts:
                z.write(f)
PY
)

# Spark puts its own pyspark.zip (source only) first on every Python process's PYTHONPATH,
# so each new worker compiled PySpark again: ~0.6 s per worker, ~0.5 s of the driver's start.
# When Spark is this Python's pip-installed pyspark, the same files are installed with
# bytecode: a launcher puts them first. Any other Spark keeps its own zip.
worker_python="$PYTHON"
driver_python="$PYSPARK_DRIVER_PYTHON"
driver_java_options="-Xss8m -XX:+UseParallelGC -Dlog4j2.configurationFile=file:$here/conf/log4j2.properties"
if [[ "$SPARK_SUBMIT" == "$(dirname "$PYTHON")/spark-submit" ]]; then
  # find_spec locates the package without importing it (an import costs ~0.2 s at start).
  site="$("$PYTHON" -c 'import importlib.util as u, pathlib
print(pathlib.Path(u.find_spec("pyspark").origin).parent.parent)')"
  worker_python="$(mktemp "$here/build/cdc-python-XXXXXXXX")"
  # The project zip too: Spark starts the Python daemon (below) before any task has put it
  # on the path.
  printf '#!/bin/sh\nPYTHONPATH="%s:%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' \
    "$site" "$zip_path" "$PYTHON" >"$worker_python"
  chmod +x "$worker_python"
  [[ "$driver_python" == "$PYTHON" ]] && driver_python="$worker_python"
  # Workers that skip a full garbage collection after every task (app/pydaemon.py).
  extra+=(--conf "spark.python.daemon.module=app.pydaemon")
  # Spark's classes mapped from `make setup`'s archive for this JDK and PySpark, if there is
  # one (app/jvm_archive.py): the driver starts seconds sooner.
  archive="$(cd "$here" && "$PYTHON" -m app.jvm_archive option)"
  [[ -n "$archive" ]] && driver_java_options="$driver_java_options $archive"
fi

# shellcheck disable=SC2086 # SPARK_ARGS is a list of options on purpose
exec "$SPARK_SUBMIT" \
  --conf "spark.pyspark.python=$worker_python" \
  --conf "spark.pyspark.driver.python=$driver_python" \
  --driver-java-options "$driver_java_options" \
  --py-files "$zip_path" \
  "${extra[@]}" ${SPARK_ARGS:-} \
  "$here/app/main.py" "$@"
