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

{{/* "true" when watchNamespaces lists namespace names only (no glob, no `!`): the operator's
rights are then a Role in each (rbac.yaml). A glob can match a namespace made after the install,
which no Role made now covers, so globs and "all namespaces" get a ClusterRole. */}}
{{- define "rillet.namespacesListed" -}}
{{- $listed := gt (len .Values.watchNamespaces) 0 -}}
{{- range .Values.watchNamespaces -}}
{{- if regexMatch "[*?!]" . -}}{{- $listed = false -}}{{- end -}}
{{- end -}}
{{- if $listed -}}true{{- end -}}
{{- end -}}
