{{- define "rillet.name" -}}rillet-operator{{- end -}}

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
