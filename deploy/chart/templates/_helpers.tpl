{{/* Names: the chart's, and the release's objects' (cut to 63 characters, DNS labels). */}}
{{- define "gpulint.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpulint.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Deployment, Service, ServiceAccount and RBAC objects: <fullname>-webhook. */}}
{{- define "gpulint.webhookName" -}}
{{- printf "%s-webhook" (include "gpulint.fullname" .) }}
{{- end }}

{{- define "gpulint.tlsSecret" -}}
{{- printf "%s-webhook-tls" (include "gpulint.fullname" .) }}
{{- end }}

{{- define "gpulint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpulint.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "gpulint.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpulint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpulint.image" -}}
{{- $reference := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- if .Values.image.digest }}
{{- $reference = printf "%s@%s" $reference .Values.image.digest }}
{{- end }}
{{- $reference }}
{{- end }}

{{/* The Service's DNS names, which the serving certificate must cover. */}}
{{- define "gpulint.dnsNames" -}}
{{- $service := include "gpulint.webhookName" . }}
{{- list (printf "%s.%s.svc" $service .Release.Namespace) (printf "%s.%s.svc.cluster.local" $service .Release.Namespace) | toJson }}
{{- end }}

{{/*
Namespaces whose ConfigMaps gpulint lists and watches, as JSON: adapter.configMapNamespaces
and the namespace of adapter.configMap NAMESPACE/NAME (gpulint.cluster.kinds.configmap_scopes);
["*"] for every namespace.
*/}}
{{- define "gpulint.configMapNamespaces" -}}
{{- $namespaces := list }}
{{- range .Values.adapter.configMapNamespaces }}
{{- $namespaces = append $namespaces (toString .) }}
{{- end }}
{{- if has "*" $namespaces }}
{{- list "*" | toJson }}
{{- else }}
{{- $configMap := .Values.adapter.configMap | default "" }}
{{- if contains "/" $configMap }}
{{- $namespaces = append $namespaces (splitList "/" $configMap | first) }}
{{- end }}
{{- $namespaces | uniq | toJson }}
{{- end }}
{{- end }}

{{/* --adapter-configmap-selector: adapter.configMapLabels as a label selector string. */}}
{{- define "gpulint.adapterSelector" -}}
{{- $pairs := list }}
{{- range $key, $value := .Values.adapter.configMapLabels }}
{{- $pairs = append $pairs (printf "%s=%s" $key (toString $value)) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
CEL for the webhook's matchConditions. Strings are quoted with Go's %q, whose escapes are all
CEL escapes. Every field is reached through has() guards, and oldObject (null on CREATE) only
on UPDATE: an expression that fails to evaluate makes the API server apply failurePolicy
(Kubernetes docs, "Matching requests: matchConditions"). The rules send CREATE and UPDATE
only, so object is never null.
*/}}

{{/* Is resource name r a GPU's (gpulint.workload: GPU_RESOURCE_NAMES and _PREFIXES, and the
config's gpu-resources, a trailing * making a prefix)? */}}
{{- define "gpulint.cel.gpuResource" -}}
{{- $exact := list "nvidia.com/gpu" "nvidia.com/gpu.shared" "amd.com/gpu" }}
{{- $prefixes := list "nvidia.com/mig-" "gpu.intel.com/" }}
{{- range (get (.Values.config | default dict) "gpu-resources") | default list }}
{{- if hasSuffix "*" . }}
{{- $prefixes = append $prefixes (trimSuffix "*" .) }}
{{- else }}
{{- $exact = append $exact . }}
{{- end }}
{{- end }}
{{- $quoted := list }}
{{- range $exact | uniq }}
{{- $quoted = append $quoted (printf "%q" .) }}
{{- end }}
{{- $tests := list (printf "r in [%s]" (join ", " $quoted)) }}
{{- range $prefixes | uniq }}
{{- $tests = append $tests (printf "r.startsWith(%q)" .) }}
{{- end }}
{{- join " || " $tests }}
{{- end }}

{{/* Does the Deployment or StatefulSet in variable $.var ask for GPUs in a container or init
container, or name DRA claims (whose device class only gpulint can look up)? Limits alone are
read: the API server refuses a GPU request without a limit before validating webhooks are
called (extended resources cannot be overcommitted; kubernetes pkg/apis/core/validation,
"Limit must be set for non overcommitable resources"). */}}
{{- define "gpulint.cel.asksForGpus" -}}
{{- $pod := printf "%s.spec.template.spec" .var }}
{{- $containers := printf "(has(%s.containers) ? %s.containers : []) + (has(%s.initContainers) ? %s.initContainers : [])" $pod $pod $pod $pod }}
{{- $gpu := printf "has(c.resources) && has(c.resources.limits) && c.resources.limits.exists(r, %s)" (include "gpulint.cel.gpuResource" .root) }}
{{- printf "(has(%s.spec) && has(%s.spec.template) && has(%s) && ((has(%s.resourceClaims) && size(%s.resourceClaims) > 0) || (%s).exists(c, %s)))" .var .var $pod $pod $pod $containers $gpu }}
{{- end }}

{{- define "gpulint.cel.workloadCondition" -}}
{{- include "gpulint.cel.asksForGpus" (dict "root" . "var" "object") }} || (request.operation == "UPDATE" && {{ include "gpulint.cel.asksForGpus" (dict "root" . "var" "oldObject") }})
{{- end }}

{{/* Is the ConfigMap in $.var the prometheus-adapter configuration gpulint reads
(gpulint.cluster.kinds.AdapterConfigMapSelector.matches)? */}}
{{- define "gpulint.cel.isAdapterConfig" -}}
{{- $values := .root.Values.adapter }}
{{- $var := .var }}
{{- $labels := $values.configMapLabels | default dict }}
{{- $configMap := $values.configMap | default "" }}
{{- $names := list }}
{{- if not (or $labels $configMap) }}
{{- $labels = dict "app.kubernetes.io/name" "prometheus-adapter" }}
{{- $names = list "prometheus-adapter" "adapter-config" }}
{{- else if $configMap }}
{{- $names = list (splitList "/" $configMap | last) }}
{{- end }}
{{- $either := list }}
{{- if $labels }}
{{- $tests := list }}
{{- range $key, $value := $labels }}
{{- $tests = append $tests (printf "%q in %s.metadata.labels && %s.metadata.labels[%q] == %q" $key $var $var $key (toString $value)) }}
{{- end }}
{{- $either = append $either (printf "(has(%s.metadata.labels) && %s)" $var (join " && " $tests)) }}
{{- end }}
{{- if $names }}
{{- $quoted := list }}
{{- range $names }}
{{- $quoted = append $quoted (printf "%q" .) }}
{{- end }}
{{- $either = append $either (printf "(has(%s.metadata.name) && %s.metadata.name in [%s])" $var $var (join ", " $quoted)) }}
{{- end }}
{{- printf "(has(%s.metadata) && (%s))" $var (join " || " $either) }}
{{- end }}

{{- define "gpulint.cel.adapterCondition" -}}
{{- $configMap := .Values.adapter.configMap | default "" }}
{{- $either := printf "%s || (request.operation == \"UPDATE\" && %s)" (include "gpulint.cel.isAdapterConfig" (dict "root" . "var" "object")) (include "gpulint.cel.isAdapterConfig" (dict "root" . "var" "oldObject")) }}
{{- if contains "/" $configMap }}
{{- printf "request.namespace == %q && (%s)" (splitList "/" $configMap | first) $either }}
{{- else }}
{{- $either }}
{{- end }}
{{- end }}

{{/*
The container's arguments: the flags of `gpulint serve` (the image's entry point). Every one
is written quoted (Go's %q, a YAML double-quoted scalar), so that no value, whatever it holds
(a newline, "- --deny-on=never", quotes), can end its list item and start another; the
schema bounds the values besides.
*/}}
{{- define "gpulint.args" -}}
{{- $serve := .Values.serve -}}
- "--tls-cert=/etc/gpulint/tls/tls.crt"
- "--tls-key=/etc/gpulint/tls/tls.key"
{{- if .Values.clientAuth.enabled }}
- {{ printf "--client-ca=/etc/gpulint/client-ca/%s" .Values.clientAuth.caKey | quote }}
{{- with .Values.clientAuth.commonName }}
- {{ printf "--client-cn=%s" . | quote }}
{{- end }}
{{- end }}
- {{ printf "--port=%v" $serve.port | quote }}
- {{ printf "--deny-on=%v" $serve.denyOn | quote }}
- {{ printf "--deadline=%v" $serve.deadline | quote }}
- {{ printf "--shutdown-delay=%v" $serve.shutdownDelay | quote }}
{{- if ne (float64 $serve.shutdownTimeout) 20.0 }}
- {{ printf "--shutdown-timeout=%v" $serve.shutdownTimeout | quote }}
{{- end }}
{{- if .Values.config }}
- "--config=/etc/gpulint/config/gpulint.yaml"
{{- end }}
{{- with $serve.select }}
- {{ printf "--select=%s" (join "," .) | quote }}
{{- end }}
{{- with $serve.ignore }}
- {{ printf "--ignore=%s" (join "," .) | quote }}
{{- end }}
{{- if $serve.noCluster }}
- "--no-cluster"
{{- else }}
{{- with $serve.namespace }}
- {{ printf "--namespace=%s" . | quote }}
{{- end }}
- {{ printf "--configmap-namespaces=%s" (join "," .Values.adapter.configMapNamespaces) | quote }}
{{- with .Values.adapter.configMap }}
- {{ printf "--adapter-configmap=%s" . | quote }}
{{- end }}
{{- with include "gpulint.adapterSelector" . }}
- {{ printf "--adapter-configmap-selector=%s" . | quote }}
{{- end }}
{{- end }}
{{- with $serve.maxBodyBytes }}
- {{ printf "--max-body-bytes=%d" (. | int64) | quote }}
{{- end }}
{{- with $serve.readTimeout }}
- {{ printf "--read-timeout=%v" . | quote }}
{{- end }}
{{- with $serve.maxConnections }}
- {{ printf "--max-connections=%d" (. | int64) | quote }}
{{- end }}
{{- with $serve.tlsCheckInterval }}
- {{ printf "--tls-check-interval=%v" . | quote }}
{{- end }}
{{- with .Values.prometheus }}
{{- if .url }}
- {{ printf "--prometheus=%s" .url | quote }}
{{- range $name, $value := .headers }}
- {{ printf "--prometheus-header=%s=%s" $name (toString $value) | quote }}
{{- end }}
{{- range $index, $header := .headersFromSecrets }}
- {{ printf "--prometheus-header=%s=$(GPULINT_PROMETHEUS_HEADER_%d)" $header.name $index | quote }}
{{- end }}
{{- with .timeout }}
- {{ printf "--prometheus-timeout=%v" . | quote }}
{{- end }}
{{- with .refresh }}
- {{ printf "--prometheus-refresh=%v" . | quote }}
{{- end }}
{{- with .lookback }}
- {{ printf "--lookback=%s" . | quote }}
{{- end }}
{{- with .minHistory }}
- {{ printf "--min-history=%s" . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- range $serve.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
tls.mode=self-signed: the CA and serving certificate, base64 as a Secret holds them, as JSON.
The Secret already installed is reused when it holds all three files, so that an upgrade keeps
the certificate the pods serve and the caBundle the API server trusts; otherwise (a first
install, `helm template`, `helm lint`, or a client without access to the Secret) a new CA
and certificate are made. Made once per render and kept on the root context, so that the
Secret and the webhook configuration get the same pair.
*/}}
{{- define "gpulint.selfSignedTLS" -}}
{{- if not (hasKey . "_gpulintTLS") }}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace (include "gpulint.tlsSecret" .)).data | default dict }}
{{- if and (get $existing "ca.crt") (get $existing "tls.crt") (get $existing "tls.key") }}
{{- $_ := set . "_gpulintTLS" (dict "ca.crt" (get $existing "ca.crt") "tls.crt" (get $existing "tls.crt") "tls.key" (get $existing "tls.key")) }}
{{- else }}
{{- $days := int .Values.tls.selfSigned.validityDays }}
{{- $ca := genCA (printf "%s webhook CA" (include "gpulint.fullname" .)) $days }}
{{- $dnsNames := include "gpulint.dnsNames" . | fromJsonArray }}
{{- $cert := genSignedCert (first $dnsNames) nil $dnsNames $days $ca }}
{{- $_ := set . "_gpulintTLS" (dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc)) }}
{{- end }}
{{- end }}
{{- get . "_gpulintTLS" | toJson }}
{{- end }}
