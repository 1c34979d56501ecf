{{- define "dialectic.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dialectic.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "dialectic.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "dialectic.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dialectic.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "dialectic.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "dialectic.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dialectic.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image reference: a digest pins it; otherwise the tag (default: appVersion). */}}
{{- define "dialectic.imageRef" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The image every service runs, under global.imageRegistry. */}}
{{- define "dialectic.image" -}}
{{- include "dialectic.registry" (dict "root" . "ref" (include "dialectic.imageRef" .)) -}}
{{- end -}}

{{/* An image reference under global.imageRegistry when it is set: the reference's
own registry (its first part, when that names a host: a dot, a port or
localhost) is replaced, the rest kept (docker.io/library/redis:7.4 →
REGISTRY/library/redis:7.4; redis:7.4 → REGISTRY/redis:7.4). */}}
{{- define "dialectic.registry" -}}
{{- $registry := trimSuffix "/" .root.Values.global.imageRegistry -}}
{{- if $registry -}}
{{- $parts := splitn "/" 2 .ref -}}
{{- $path := .ref -}}
{{- if and $parts._1 (or (contains "." $parts._0) (contains ":" $parts._0) (eq $parts._0 "localhost")) -}}
{{- $path = $parts._1 -}}
{{- end -}}
{{- printf "%s/%s" $registry $path -}}
{{- else -}}
{{- .ref -}}
{{- end -}}
{{- end -}}

{{/* Containers given in values (extraContainers, initContainers), their images under global.imageRegistry. */}}
{{- define "dialectic.containers" -}}
{{- $out := list -}}
{{- range .containers -}}
{{- $c := deepCopy . -}}
{{- $_ := set $c "image" (include "dialectic.registry" (dict "root" $.root "ref" $c.image)) -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "dialectic.secretName" -}}
{{- default (printf "%s-connections" (include "dialectic.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "dialectic.modelSecretName" -}}
{{- default (printf "%s-model-keys" (include "dialectic.fullname" .)) .Values.modelKeys.existingSecret -}}
{{- end -}}

{{- define "dialectic.hasModelSecret" -}}
{{- if or .Values.modelKeys.existingSecret .Values.modelKeys.values -}}true{{- end -}}
{{- end -}}

{{/* A service's topology spread: its own list when set ([] for none), else by
zone and hostname per the topologySpread defaults, ScheduleAnyway. */}}
{{- define "dialectic.topologySpread" -}}
{{- if kindIs "slice" .svc.topologySpreadConstraints -}}
{{- toYaml .svc.topologySpreadConstraints -}}
{{- else -}}
{{- $spread := .root.Values.topologySpread -}}
{{- $keys := list -}}
{{- if $spread.zone }}{{ $keys = append $keys "topology.kubernetes.io/zone" }}{{ end -}}
{{- if $spread.hostname }}{{ $keys = append $keys "kubernetes.io/hostname" }}{{ end -}}
{{- $out := list -}}
{{- range $keys -}}
{{- $out = append $out (dict "maxSkew" (int $spread.maxSkew) "topologyKey" . "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" (include "dialectic.name" $.root) "app.kubernetes.io/instance" $.root.Release.Name "app.kubernetes.io/component" $.name))) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
{{- end -}}

{{- define "dialectic.internalSecretName" -}}
{{- default (printf "%s-internal" (include "dialectic.fullname" .)) .Values.internal.existingSecret -}}
{{- end -}}

{{- define "dialectic.serviceKeysSecretName" -}}
{{- default (printf "%s-service-keys" (include "dialectic.fullname" .)) .Values.internal.serviceKeys.existingSecret -}}
{{- end -}}

{{/* The URL another service calls `name` at: its headless Service, whose name
resolves to every ready pod (services.yaml), on the pods' own gRPC port. */}}
{{- define "dialectic.internalUrl" -}}
{{- printf "http://%s-%s-pods:%d" (include "dialectic.fullname" .root) .name (int (index .root.Values.services .name).port) -}}
{{- end -}}
