{{- define "brain-keeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "brain-keeper.fullname" -}}
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

{{- define "brain-keeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "brain-keeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brain-keeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "brain-keeper.labels" -}}
helm.sh/chart: {{ include "brain-keeper.chart" . }}
{{ include "brain-keeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: brain
app.kubernetes.io/component: keeper
{{- end }}

{{- define "brain-keeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "brain-keeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "brain-keeper.vaultVolume" -}}
- name: vault
{{- if eq .Values.vault.type "nfs" }}
  nfs:
    server: {{ required "vault.nfs.server is required when vault.type=nfs" .Values.vault.nfs.server }}
    path: {{ required "vault.nfs.path is required when vault.type=nfs" .Values.vault.nfs.path }}
{{- else if eq .Values.vault.type "pvc" }}
  persistentVolumeClaim:
    claimName: {{ required "vault.pvc.claimName is required" .Values.vault.pvc.claimName }}
{{- else }}
{{- fail "vault.type must be pvc or nfs" }}
{{- end }}
{{- end }}
