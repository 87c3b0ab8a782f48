{{- define "rillet.name" -}}rillet-operator{{- end -}}

{{/* Cluster-scoped objects carry the release's namespace: two releases (say one operator per
team namespace) would otherwise fight over one ClusterRole and the second install fail. */}}
{{- define "rillet.clusterName" -}}{{ .Release.Namespace }}-rillet-operator{{- end -}}

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
