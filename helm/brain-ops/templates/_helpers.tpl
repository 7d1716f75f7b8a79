{{/* Names ---------------------------------------------------------------------------- */}}

{{- define "brain-ops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "brain-ops.fullname" -}}
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

{{- define "brain-ops.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "brain-ops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brain-ops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "brain-ops.labels" -}}
helm.sh/chart: {{ include "brain-ops.chart" . }}
{{ include "brain-ops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: brain
{{- end }}

{{- define "brain-ops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "brain-ops.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "brain-ops.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Environment: settings from `env`; secrets only through secretKeyRef, and only to the
     containers that use them: "llmKey" (bool) and "redis" ("", "optional" or "required"). */}}

{{- define "brain-ops.env" -}}
{{- $ctx := .ctx }}
{{- range $name := list "BRAIN_LLM_API_KEY" "BRAIN_REDIS_URL" }}
{{- if hasKey $ctx.Values.env $name }}
{{- fail (printf "env.%s: secrets never go in values; put it in the Secret named by secret.existingSecret" $name) }}
{{- end }}
{{- end }}
{{- if .llmKey }}
- name: BRAIN_LLM_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "secret.existingSecret is required" $ctx.Values.secret.existingSecret }}
      key: {{ $ctx.Values.secret.llmApiKeyKey }}
      optional: true
{{- end }}
{{- if .redis }}
- name: BRAIN_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "secret.existingSecret is required" $ctx.Values.secret.existingSecret }}
      key: {{ $ctx.Values.secret.redisUrlKey }}
      optional: {{ ne .redis "required" }}
{{- end }}
{{- range $name, $value := $ctx.Values.env }}
{{- if not (regexMatch "^BRAIN_[A-Z0-9_]+$" $name) }}
{{- fail (printf "env.%s: only BRAIN_<NAME> settings belong in env" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* Volumes ---------------------------------------------------------------------------- */}}

{{- define "brain-ops.vaultVolume" -}}
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

{{- define "brain-ops.sessionsVolume" -}}
- name: sessions
{{- if eq .Values.sessions.type "nfs" }}
  nfs:
    server: {{ required "sessions.nfs.server is required when sessions.type=nfs" .Values.sessions.nfs.server }}
    path: {{ required "sessions.nfs.path is required when sessions.type=nfs" .Values.sessions.nfs.path }}
    readOnly: true
{{- else if eq .Values.sessions.type "pvc" }}
  persistentVolumeClaim:
    claimName: {{ required "sessions.pvc.claimName is required" .Values.sessions.pvc.claimName }}
    readOnly: true
{{- else }}
{{- fail "sessions.type must be pvc or nfs" }}
{{- end }}
{{- end }}

{{- define "brain-ops.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end }}

{{- define "brain-ops.vaultMount" -}}
- name: vault
  mountPath: /vault
{{- with .Values.vault.subPath }}
  subPath: {{ . }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* Pod parts shared by the CronJobs and the Deployment ------------------------------- */}}

{{- define "brain-ops.podCommon" -}}
serviceAccountName: {{ include "brain-ops.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.initVault }}
initContainers:
  - name: init-vault
    image: {{ include "brain-ops.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args: ["init", "--vault", "/vault"]
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    resources:
      requests:
        cpu: 10m
        memory: 64Mi
      limits:
        cpu: 200m
        memory: 128Mi
    volumeMounts:
      {{- include "brain-ops.vaultMount" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* Job spec of a CronJob: retry only when the vault lock is held (exit 3). --------------- */}}

{{- define "brain-ops.jobPolicy" -}}
activeDeadlineSeconds: {{ .job.activeDeadlineSeconds }}
backoffLimit: {{ .job.lockRetries }}
podFailurePolicy:
  rules:
    # Evicted or preempted pods are retried without counting against backoffLimit.
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
    # Only "another tick holds the vault lock" is worth retrying; other failures are final.
    - action: FailJob
      onExitCodes:
        containerName: {{ .container }}
        operator: NotIn
        values: [3]
{{- end }}
