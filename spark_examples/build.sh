#!/usr/bin/env bash
# Resolves Spark's stock Kafka connector (spark-sql-kafka-0-10_2.13, same version as the
# installed PySpark) and its dependencies beyond PySpark's own jars into spark_examples/jars/.
# Idempotent: when jars/ already holds a complete set for this version it returns at once.
# Usage: bash spark_examples/build.sh   (SPARK_PYTHON=... picks the interpreter that has pyspark;
#        SPARK_VERSION=X.Y.Z resolves a version before that PySpark is installed, to check a pin)
set -euo pipefail
cd "$(dirname "$0")"

PY="${SPARK_PYTHON:-../.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ -z "${SPARK_VERSION:-}" ] && ! SPARK_VERSION="$("$PY" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)"; then
    echo "spark_examples/build.sh: pyspark is not installed for $PY (pip install -e '.[test]')" >&2
    exit 1
fi

STAMP="jars/.complete-$SPARK_VERSION"
if [ -f "$STAMP" ]; then
    exit 0
fi

command -v mvn >/dev/null || { echo "spark_examples/build.sh: mvn not found" >&2; exit 1; }
rm -rf jars
mvn -q -B dependency:copy-dependencies -Dspark.version="$SPARK_VERSION" \
    -DincludeScope=runtime -DoutputDirectory=jars
for required in "spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar" \
                "spark-token-provider-kafka-0-10_2.13-$SPARK_VERSION.jar"; do
    [ -f "jars/$required" ] || { echo "spark_examples/build.sh: $required missing" >&2; exit 1; }
done
touch "$STAMP"
echo "spark_examples/jars: $(ls jars | tr '\n' ' ')"
