{{- define "rillet.name" -}}rillet-operator{{- end -}}

{{/* Cluster-scoped objects carry the release's namespace: two releases (say one operator per
team namespace) would otherwise fight over one ClusterRole and the second install fail. */}}
{{- define "rillet.clusterName" -}}{{ .Release.Namespace }}-rillet-operator{{- end -}}

{{/* The ClusterRole every App's driver is bound to in its namespace (driverrole.yaml). */}}
{{- define "rillet.driverClusterRole" -}}{{ include "rillet.clusterName" . }}-driver{{- end -}}

{{- define "rillet.labels" -}}
app.kubernetes.io/name: rillet
app.kubernetes.io/component: operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rillet.selector" -}}
app.kubernetes.io/name: rillet
app.kubernetes.io/component: operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The namespaces the operator watches, as a JSON list: watchNamespaces, or the release's
namespace alone when it is empty; [] (every namespace) with watchAnyNamespace. The schema refuses
watchAnyNamespace with watchNamespaces; the fail is for an install that skips the schema
(--skip-schema-validation), with the message the values model gives (rillet.api.chartvalues). */}}
{{- define "rillet.watched" -}}
{{- if and .Values.watchAnyNamespace .Values.watchNamespaces -}}
{{- fail "watchAnyNamespace watches every namespace: leave watchNamespaces empty with it" -}}
{{- else if .Values.watchAnyNamespace -}}
[]
{{- else if .Values.watchNamespaces -}}
{{ toJson .Values.watchNamespaces }}
{{- else -}}
{{ list .Release.Namespace | toJson }}
{{- end -}}
{{- end -}}

{{/* "true" when the operator watches namespace names only (no glob, no `!`): its rights are
then a Role in each (rbac.yaml). A glob can match a namespace made after the install, which no
Role made now covers, so globs and "every namespace" get a ClusterRole. */}}
{{- define "rillet.namespacesListed" -}}
{{- $watched := include "rillet.watched" . | fromJsonArray -}}
{{- $listed := gt (len $watched) 0 -}}
{{- range $watched -}}
{{- if regexMatch "[*?!]" . -}}{{- $listed = false -}}{{- end -}}
{{- end -}}
{{- if $listed -}}true{{- end -}}
{{- end -}}
