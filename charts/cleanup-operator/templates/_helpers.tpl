{{/* The chart's name. */}}
{{- define "cleanup-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: the release name when it contains the
chart name (release cleanup-operator gives the names of config/default).
At most 28 characters, so that the longest name, the metrics Service's,
stays a 63-character DNS label.
*/}}
{{- define "cleanup-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 28 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 28 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 28 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "cleanup-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "cleanup-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels the Services select the manager pods by, as config/default's:
the Deployment's selector cannot change on upgrade.
*/}}
{{- define "cleanup-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cleanup-operator.name" . }}
control-plane: controller-manager
{{- end }}

{{- define "cleanup-operator.serviceAccountName" -}}
{{ include "cleanup-operator.fullname" . }}-controller-manager
{{- end }}

{{/* The webhook's Service, Secret and configuration. */}}
{{- define "cleanup-operator.webhookServiceName" -}}
{{ include "cleanup-operator.fullname" . }}-webhook-service
{{- end }}
{{- define "cleanup-operator.webhookSecretName" -}}
{{ include "cleanup-operator.fullname" . }}-webhook-server-cert
{{- end }}
{{- define "cleanup-operator.webhookConfigName" -}}
{{ include "cleanup-operator.fullname" . }}-validating-webhook-configuration
{{- end }}

{{/* Whether the manager rotates its own webhook certificate. */}}
{{- define "cleanup-operator.selfCert" -}}
{{- if and .Values.webhook.enabled (eq .Values.certificates.source "self") }}true{{ end }}
{{- end }}

{{/* Whether cert-manager issues the webhook certificate. */}}
{{- define "cleanup-operator.certManager" -}}
{{- if and .Values.webhook.enabled (eq .Values.certificates.source "cert-manager") }}true{{ end }}
{{- end }}

{{/* The manager's image. */}}
{{- define "cleanup-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{/* Where the webhook server reads its certificate. */}}
{{- define "cleanup-operator.certPath" -}}
/tmp/k8s-webhook-server/serving-certs
{{- end }}

{{/* The ServiceAccount as a subject of the bindings. */}}
{{- define "cleanup-operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "cleanup-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}
