{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "timesync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already has it. */}}
{{- define "timesync.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "timesync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "timesync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: standalone
{{- end }}

{{- define "timesync.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "timesync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: timesync
{{- end }}

{{- define "timesync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "timesync.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "timesync.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The HTTP port the sidecar listens on: probes, Service and ServiceMonitor follow it. */}}
{{- define "timesync.httpPort" -}}
{{- $port := index .Values.config "http.port" | int }}
{{- if eq $port 0 }}
{{- fail "config.http.port=0 turns the sidecar's HTTP server off, but the chart's probes, Service and ServiceMonitor need it: pick a port (default 8080)" }}
{{- end }}
{{- $port }}
{{- end }}

{{/*
The sidecar's config file: one `key=value` line per non-empty entry of .Values.config, sorted.
Helm reads YAML numbers as floats; whole numbers are printed as integers (60000, not 6e+04).
Fails early, naming the key, when a required key is missing or replicas cannot share the work.
*/}}
{{- define "timesync.properties" -}}
{{- range $key := list "bootstrap.servers" "input.topics" "output.topic" }}
{{- if not (index $.Values.config $key) }}
{{- fail (printf "config.%s is required (the sidecar cannot start without it): set it in your values file or with --set 'config.%s=...'" $key (replace "." "\\." $key)) }}
{{- end }}
{{- end }}
{{- $grouping := index .Values.config "task.grouping" | default "single" }}
{{- if and (gt (int .Values.replicaCount) 1) (ne $grouping "partition") }}
{{- fail (printf "replicaCount=%d needs config.task.grouping=partition (got %q): with single grouping each replica merges every input partition, so the ordered topic would get every record once per replica (under exactly_once_v2 the replicas fence each other instead); the sidecar also refuses to start a second replica of a single-task group unless task.grouping.single.guard=false" (int .Values.replicaCount) $grouping) }}
{{- end }}
{{- $config := deepCopy .Values.config }}
{{- $registry := (.Values.schemaRegistry | default dict).url | default "" }}
{{- if and $registry (not (index $config "schema.registry.url")) }}
{{- $_ := set $config "schema.registry.url" $registry }}
{{- end }}
{{- range $key := keys $config | sortAlpha }}
{{- $value := index $config $key }}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}
{{- if and (kindIs "float64" $value) (eq $value (floor $value)) }}
{{ $key }}={{ int64 $value }}
{{- else }}
{{ $key }}={{ $value }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret holding the acting endpoints' token: the user's, or the one the chart generates. */}}
{{- define "timesync.httpAuthSecret" -}}
{{- default (printf "%s-http-auth" (include "timesync.fullname" .)) .Values.httpAuth.existingSecret }}
{{- end }}
