{{/* The chart's name. */}}
{{- define "cdcsync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of the release's objects. */}}
{{- define "cdcsync.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "cdcsync.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cdcsync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pod. */}}
{{- define "cdcsync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cdcsync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The service account's name. */}}
{{- define "cdcsync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cdcsync.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the environment comes from. */}}
{{- define "cdcsync.secretName" -}}
{{- if .Values.secret.create }}
{{- include "cdcsync.fullname" . }}
{{- else }}
{{- .Values.secret.existingSecret }}
{{- end }}
{{- end }}

{{/* cdcsync.yaml: .Values.config with http.listen on every interface. */}}
{{- define "cdcsync.config" -}}
{{- $http := dict "http" (dict "listen" (printf "0.0.0.0:%d" (int .Values.service.port))) }}
{{- toYaml (mergeOverwrite (deepCopy .Values.config) $http) }}
{{- end }}
