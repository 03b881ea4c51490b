{{- define "quartet.name" -}}quartet{{- end -}}
{{- define "quartet.labels" -}}
app.kubernetes.io/name: quartet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "quartet.selector" -}}
app.kubernetes.io/name: quartet
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
