{{/* The namespace line of a namespaced object: the release's, but in namespaced mode, where the
manifest is applied with kubectl -n (or helm -n) to the namespace it runs in. */}}
{{- define "queen-operator.namespace" -}}
{{- if not .Values.namespaced }}
  namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}

{{/* The operator's image. */}}
{{- define "queen-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The task queue. */}}
{{- define "queen-operator.taskQueue" -}}
{{- if .Values.temporal.taskQueue }}{{ .Values.temporal.taskQueue }}{{ else if .Values.namespaced }}queen-operator-$(POD_NAMESPACE){{ else }}queen-operator{{ end }}
{{- end }}
