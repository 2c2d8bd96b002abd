#!/usr/bin/env bash
# Entry point of the timesync-spark image.
#
#   driver ARGS...    Spark on Kubernetes starts the driver pod with this: run spark-submit in
#                     client mode inside the pod (cluster-mode submission already happened).
#   executor          Spark on Kubernetes starts executor pods with this: run the executor
#                     backend; every value comes from SPARK_* variables Spark sets on the pod.
#   anything else     the timesync job CLI: `timesync-spark join|aggregate|suppress ...`
#                     (local[*] mode in compose or on a laptop).
set -euo pipefail

spark_home="${SPARK_HOME:-/opt/spark}"
classpath="${spark_home}/jars/*"
if [[ -n "${SPARK_CONF_DIR:-}" ]]; then
  classpath="${SPARK_CONF_DIR}:${classpath}"
fi
if [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]]; then
  classpath="${classpath}:${SPARK_EXTRA_CLASSPATH}"
fi

case "${1:-}" in
  driver)
    shift
    exec "${spark_home}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    # Spark passes extra JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order.
    java_opts=()
    while IFS= read -r opt; do
      java_opts+=("$opt")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
      "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
      -cp "${classpath}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" \
      --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" \
      --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  *)
    exec timesync-spark "$@"
    ;;
esac
