{{/* Labels of the manager's objects, the same as `fleet install controller` sets. */}}
{{- define "fleet.labels" -}}
app: fleet-manager
{{- end }}

{{/*
Selector of a shard's manager pods: the default shard's (no ID) keeps the
manager's labels, which an upgrade cannot change; another shard's pods carry
other labels, so that no Deployment's selector takes another's pods.
*/}}
{{- define "fleet.shardSelector" -}}
{{- if . -}}
app: fleet-manager-shard
fleet.cattle.io/shard-id: {{ . | quote }}
{{- else -}}
{{ include "fleet.labels" . }}
{{- end -}}
{{- end }}

{{/* Labels of the local agent's objects. */}}
{{- define "fleet.agentLabels" -}}
app: fleet-agent
app.kubernetes.io/managed-by: fleet
{{- end }}

{{/*
The namespace of registration tokens' ServiceAccounts: the system namespace
with "-system" replaced by "-clusters-system" (cattle-fleet-system gives
cattle-fleet-clusters-system), as internal/names computes it.
*/}}
{{- define "fleet.registrationNamespace" -}}
{{- printf "%s-clusters-system" (trimSuffix "-system" .Release.Namespace) -}}
{{- end }}

{{/* Label test of a namespace object the manager made (fleet.cattle.io/managed=true), in CEL. */}}
{{- define "fleet.managedCEL" -}}
({{ . }} != null && has({{ . }}.metadata.labels) && 'fleet.cattle.io/managed' in {{ . }}.metadata.labels && {{ . }}.metadata.labels['fleet.cattle.io/managed'] == 'true')
{{- end }}
